/* Resampling is pure arithmetic, so the MEDIA=0 build compiles the same file. */
#include "../resize.c"
