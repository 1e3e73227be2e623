/* serve_cdp: drives h3 serve's page in headless Chromium through the DevTools protocol over a pipe
 * (--remote-debugging-pipe: NUL-terminated JSON messages, Chromium reads fd 3 and writes fd 4), for
 * tests/cli/serve.sh:
 *   serve_cdp CHROMIUM URL API_KEY SCREENSHOT.png PROFILE_DIR [KEYFRAME.png]
 * opens URL, signs in with the key when the page asks, types a prompt (Input.insertText), sets the tiny snapshot's
 * sizes (and KEYFRAME as the first_frame upload: an fl2va job), submits,
 * waits until the <video> element has loaded the clip (readyState >= 2 and its size known), saves a screenshot and
 * prints "video loaded: WxH, ...", then clicks the history's "new seed" and waits until that second job completed
 * ("re-run: PROMPT seed A | PROMPT seed B"; "remix: N input(s) kept, remixed from the first" when the second job is
 * a remix of the first with its uploads). Exit 0 on success, 1 with one line on failure. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int to_chrome = -1, from_chrome = -1, next_id = 1;
static char *inbuf;
static size_t inlen, incap;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static void die(const char *msg) {
    printf("FAIL: %s\n", msg);
    exit(1);
}

/* the next message (malloc'd JSON) or NULL at the deadline */
static json_t *read_msg(double deadline) {
    for (;;) {
        char *z = inlen ? memchr(inbuf, 0, inlen) : NULL;
        if (z) {
            json_t *m = json_loadb(inbuf, (size_t)(z - inbuf), 0, NULL);
            size_t used = (size_t)(z - inbuf) + 1;
            memmove(inbuf, inbuf + used, inlen - used), inlen -= used;
            return m;
        }
        double left = deadline - now();
        if (left <= 0) return NULL;
        struct pollfd p = {from_chrome, POLLIN, 0};
        if (poll(&p, 1, (int)(left * 1000) + 1) <= 0) continue;
        if (incap - inlen < 65536) {
            incap = incap * 2 + 65536;
            inbuf = realloc(inbuf, incap);
            if (!inbuf) die("out of memory");
        }
        ssize_t n = read(from_chrome, inbuf + inlen, incap - inlen);
        if (n <= 0) die("chromium closed the DevTools pipe");
        inlen += (size_t)n;
    }
}

/* sends method(params) in session (NULL = the browser) and returns its result (a new reference) */
static json_t *call(const char *session, const char *method, json_t *params, double timeout) {
    int id = next_id++;
    json_t *m = json_pack("{s:i, s:s, s:o}", "id", id, "method", method, "params", params ? params : json_object());
    if (session) json_object_set_new(m, "sessionId", json_string(session));
    char *text = json_dumps(m, JSON_COMPACT);
    json_decref(m);
    size_t n = strlen(text) + 1; /* with its NUL */
    for (size_t off = 0; off < n;) {
        ssize_t w = write(to_chrome, text + off, n - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) die("cannot write to chromium");
        off += (size_t)w;
    }
    free(text);
    double deadline = now() + timeout;
    for (;;) {
        json_t *r = read_msg(deadline);
        if (!r) {
            char msg[128];
            snprintf(msg, sizeof msg, "no answer to %s", method);
            die(msg);
        }
        if (json_integer_value(json_object_get(r, "id")) == id) {
            json_t *err = json_object_get(r, "error");
            if (err) {
                char *t = json_dumps(err, JSON_COMPACT);
                fprintf(stderr, "%s: %s\n", method, t);
                die("DevTools error");
            }
            json_t *res = json_incref(json_object_get(r, "result"));
            json_decref(r);
            return res;
        }
        json_decref(r); /* an event */
    }
}

/* evaluates an expression in the page; its value as JSON text (malloc'd) */
static char *eval(const char *session, const char *expr) {
    json_t *r = call(session, "Runtime.evaluate",
                     json_pack("{s:s, s:b, s:b}", "expression", expr, "returnByValue", 1, "awaitPromise", 1), 30);
    json_t *v = json_object_get(json_object_get(r, "result"), "value");
    char *t = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT) : strdup("null");
    json_decref(r);
    return t;
}

static unsigned char *b64_decode(const char *s, size_t *out) {
    size_t n = strlen(s);
    unsigned char *o = malloc(n / 4 * 3 + 3);
    uint32_t acc = 0;
    int bits = 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)s[i], v;
        if (c >= 'A' && c <= 'Z') v = c - 'A';
        else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
        else if (c >= '0' && c <= '9') v = c - '0' + 52;
        else if (c == '+') v = 62;
        else if (c == '/') v = 63;
        else continue;
        acc = acc << 6 | (uint32_t)v, bits += 6;
        if (bits >= 8) bits -= 8, o[k++] = (unsigned char)(acc >> bits);
    }
    *out = k;
    return o;
}

int main(int argc, char **argv) {
    if (argc != 6 && argc != 7) {
        fprintf(stderr, "usage: serve_cdp CHROMIUM URL API_KEY SCREENSHOT.png PROFILE_DIR [KEYFRAME.png]\n");
        return 2;
    }
    char *key_js = NULL; /* the keyframe's bytes as a JSON string of base64 */
    if (argc == 7) {
        FILE *kf = fopen(argv[6], "rb");
        static unsigned char buf[1 << 20];
        size_t n = kf ? fread(buf, 1, sizeof buf, kf) : 0;
        if (kf) fclose(kf);
        if (!n || n == sizeof buf) die("cannot read the keyframe (at most 1 MiB)");
        static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        key_js = malloc((n + 2) / 3 * 4 + 3);
        size_t o = 0;
        key_js[o++] = '"';
        for (size_t i = 0; i < n; i += 3) {
            uint32_t w = (uint32_t)buf[i] << 16 | (i + 1 < n ? (uint32_t)buf[i + 1] << 8 : 0) | (i + 2 < n ? buf[i + 2] : 0);
            key_js[o++] = tab[w >> 18], key_js[o++] = tab[w >> 12 & 63];
            key_js[o++] = i + 1 < n ? tab[w >> 6 & 63] : '=';
            key_js[o++] = i + 2 < n ? tab[w & 63] : '=';
        }
        key_js[o++] = '"', key_js[o] = 0;
    }
    int in[2], out[2];
    if (pipe(in) || pipe(out)) die("pipe");
    signal(SIGPIPE, SIG_IGN);
    pid_t pid = fork();
    if (pid == 0) {
        /* Chromium reads commands on fd 3 and writes answers on fd 4 */
        dup2(in[0], 3), dup2(out[1], 4);
        for (int fd = 5; fd < 64; fd++) close(fd);
        char prof[1024];
        snprintf(prof, sizeof prof, "--user-data-dir=%s", argv[5]);
        int devnull = open("/dev/null", 1);
        if (devnull >= 0) dup2(devnull, 1), dup2(devnull, 2);
        execl(argv[1], argv[1], "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--no-first-run", "--no-default-browser-check", "--mute-audio", "--remote-debugging-pipe",
              "--window-size=1280,900", prof, "about:blank", (char *)NULL);
        _exit(127);
    }
    close(in[0]), close(out[1]);
    to_chrome = in[1], from_chrome = out[0];
    json_t *r = call(NULL, "Target.createTarget", json_pack("{s:s}", "url", "about:blank"), 60);
    char target[128];
    snprintf(target, sizeof target, "%s", json_string_value(json_object_get(r, "targetId")));
    json_decref(r);
    r = call(NULL, "Target.attachToTarget", json_pack("{s:s, s:b}", "targetId", target, "flatten", 1), 30);
    char session[128];
    snprintf(session, sizeof session, "%s", json_string_value(json_object_get(r, "sessionId")));
    json_decref(r);
    json_decref(call(session, "Page.enable", NULL, 30));
    json_decref(call(session, "Page.navigate", json_pack("{s:s}", "url", argv[2]), 30));
    double t0 = now();
    char *v;
    for (;;) { /* the page is up when its form is */
        v = eval(session, "document.readyState === 'complete' && !!document.getElementById('prompt')");
        int ok = !strcmp(v, "true");
        free(v);
        if (ok) break;
        if (now() - t0 > 30) die("the page did not load");
        usleep(200000);
    }
    /* with --api-key-file the page asks for the key at once (its first request answers 401): sign in, then wait
     * until its start-up requests are done (window.h3Ready) */
    int signed_in = 0, previews = 0;
    t0 = now();
    for (;;) {
        v = eval(session, "getComputedStyle(document.getElementById('login')).display === 'flex' ? 'login' : "
                          "(window.h3Ready ? 'ready' : '')");
        int login = !strcmp(v, "\"login\""), ready = !strcmp(v, "\"ready\"");
        free(v);
        if (ready) break;
        if (login && !signed_in) {
            char js[1024];
            snprintf(js, sizeof js, "document.getElementById('key').value = %s; document.getElementById('key-save').click(); true",
                     json_dumps(json_string(argv[3]), JSON_ENCODE_ANY));
            free(eval(session, js));
            signed_in = 1;
        }
        if (now() - t0 > 30) die("the page did not get ready (sign-in)");
        usleep(200000);
    }
    /* the prompt typed (Input.insertText into the focused textarea, as a keyboard's text input would) */
    free(eval(session, "document.getElementById('prompt').focus(); true"));
    json_decref(call(session, "Input.insertText", json_pack("{s:s}", "text", "A red fox runs through fresh snow."), 30));
    v = eval(session, "document.getElementById('prompt').value");
    if (strcmp(v, "\"A red fox runs through fresh snow.\"")) die("the typed prompt is not in the prompt box");
    free(v);
    /* the keyframe as the first_frame file (a File in a DataTransfer, as a file picker gives it) */
    if (key_js) {
        size_t n = strlen(key_js) + 512;
        char *js = malloc(n);
        snprintf(js, n, "(() => { const b = Uint8Array.from(atob(%s), (c) => c.charCodeAt(0)); const dt = new DataTransfer(); "
                        "dt.items.add(new File([b], 'key.png', {type: 'image/png'})); const e = document.getElementById('first_frame'); "
                        "e.files = dt.files; return e.files.length; })()", key_js);
        v = eval(session, js);
        free(js);
        if (strcmp(v, "1")) die("the keyframe could not be set as the first_frame file");
        free(v);
    }
    /* the tiny snapshot's sizes, then Generate */
    free(eval(session, "document.getElementById('size').value = '64x32';"
                       "document.getElementById('seconds').value = '4.5';"
                       "document.getElementById('steps').value = '2';"
                       "document.getElementById('seed').value = '7';"
                       "document.getElementById('submit').click(); true"));
    t0 = now();
    for (;;) {
        v = eval(session, "document.getElementById('preview').src.startsWith('data:image/png') ? 1 : 0");
        previews |= !strcmp(v, "1");
        free(v);
        v = eval(session, "(() => { const e = document.getElementById('video'); return e.readyState >= 2 && e.videoWidth > 0 ? "
                          "e.videoWidth + 'x' + e.videoHeight : (document.getElementById('error').textContent ? 'error: ' + "
                          "document.getElementById('error').textContent : ''); })()");
        if (strncmp(v, "\"\"", 2)) break;
        free(v);
        if (now() - t0 > 150) die("the <video> did not load the clip in 150 s");
        usleep(300000);
    }
    if (!strncmp(v, "\"error", 6)) {
        printf("FAIL: the page says %s\n", v);
        return 1;
    }
    /* the video at its first frame, then the screenshot */
    free(eval(session, "new Promise((res) => { const e = document.getElementById('video'); e.currentTime = 0.5; "
                       "e.onseeked = () => res(true); setTimeout(() => res(false), 3000); })"));
    r = call(session, "Page.captureScreenshot", json_pack("{s:s}", "format", "png"), 30);
    size_t n;
    unsigned char *png = b64_decode(json_string_value(json_object_get(r, "data")), &n);
    FILE *f = fopen(argv[4], "wb");
    if (!f || fwrite(png, 1, n, f) != n || fclose(f)) die("cannot write the screenshot");
    char dims[64];
    snprintf(dims, sizeof dims, "%.*s", (int)strlen(v) - 2, v + 1);
    free(v);
    /* the history's "new seed": the job's settings again with another seed, a second clip */
    free(eval(session, "document.querySelectorAll('#history tr')[0].querySelectorAll('button')[1].click(); true"));
    double t1 = now();
    for (;;) {
        v = eval(session, "fetch('/v1/videos?limit=10').then((r) => r.json()).then((d) => d.data.length === 2 && "
                          "d.data.every((x) => x.status === 'completed') ? d.data.map((x) => x.prompt + ' seed ' + "
                          "x.settings.seed).join(' | ') : '')");
        if (strcmp(v, "\"\"")) break;
        free(v);
        if (now() - t1 > 120) die("the re-run with a new seed did not complete in 120 s");
        usleep(300000);
    }
    printf("re-run: %s\n", v);
    free(v);
    /* the re-run is a remix of the first job: the same uploads (roles, bytes) */
    v = eval(session, "fetch('/v1/videos?limit=10').then((r) => r.json()).then((d) => { const [b, a] = d.data; "
                      "const sig = (x) => JSON.stringify(x.inputs.map((i) => [i.role, i.bytes])); "
                      "return b.remixed_from_video_id === a.id && sig(a) === sig(b) ? b.inputs.length : -1; })");
    if (!strcmp(v, "-1")) die("the re-run is not a remix of the first job with its uploads");
    printf("remix: %s input(s) kept, remixed from the first\n", v);
    free(v);
    /* Browser.close, not waited for (the pipe closes with it); then the browser process is reaped */
    const char bye[] = "{\"id\":999999,\"method\":\"Browser.close\",\"params\":{}}";
    if (write(to_chrome, bye, sizeof bye) < 0) kill(pid, SIGTERM);
    int st;
    for (int i = 0; i < 50 && waitpid(pid, &st, WNOHANG) == 0; i++) usleep(100000);
    if (waitpid(pid, &st, WNOHANG) == 0) kill(pid, SIGKILL), waitpid(pid, &st, 0);
    printf("video loaded: %s, preview seen: %s, screenshot %zu bytes, %.1f s\n", dims, previews ? "yes" : "no", n, now() - t0);
    return 0;
}
