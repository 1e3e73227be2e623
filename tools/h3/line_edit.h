/* The interactive session's line input (docs/model/features.md 3): with a terminal on stdin and a build with libedit
 * (EDIT=1, the default when its headers are installed), a line editor with history kept in $HOME/.h3_history
 * (H3_HISTORY overrides the path; 500 entries; long lines wrap); otherwise plain lines from stdin (pipes,
 * files), with the prompt printed only on a terminal. */
#ifndef H3_LINE_EDIT_H
#define H3_LINE_EDIT_H

#include <signal.h>
#include <stddef.h>

typedef struct line_reader line_reader;

line_reader *line_reader_new(void); /* NULL: out of memory */
/* The next line without its line end (malloc'd, the caller frees it), or NULL at the end of the input. *len: the
 * bytes read, so a NUL byte inside the line shows as strlen(line) < *len. */
char *line_reader_read(line_reader *r, const char *prompt, size_t *len);
/* Whether lines come from the editor (for messages and tests). */
int line_reader_edits(const line_reader *r);
void line_reader_free(line_reader *r); /* NULL is fine */
/* flag: set by the caller's SIGINT handler (installed without SA_RESTART). When a read is interrupted with the flag
 * set, the line being typed is dropped, the flag cleared and a fresh line read (Ctrl-C cancels the line; Ctrl-D or
 * the end of the input ends). */
void line_reader_set_interrupt(line_reader *r, volatile sig_atomic_t *flag);

#endif
