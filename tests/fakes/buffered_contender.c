/* A stand-in contender in C whose stdout is block-buffered, as stdio makes it on a pipe unless
 * told otherwise: its lines leave 4 KB at a time (or at its exit), whatever the time they were
 * written. It keeps D4's grammar and its own cumulative clock, so only the stamps are wrong.
 *
 * Command line as the protocol's template; it reads --steps and answers `+mica info -mica`.
 * FAKE_STDOUT=line makes it line-buffered (what `+mica stdout=line -mica` does for Mica);
 * FAKE_INFO=none makes it a program that does not know `+mica info` and trains instead;
 * FAKE_STEP_MS sets its pace (default 2 ms a step), FAKE_STEPS how many steps it trains
 * whatever it is told, FAKE_PAD the bytes of a line it prints after each step line (so a
 * buffer fills early). Tests compile it with the machine's cc.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* Each step sleeps its whole pace after the one before, never to a deadline: a program a loaded
 * machine held up does not catch up in lines its own clock puts at once (less than the kit's
 * 1 ms apart, which no burst can be told from), so its lines stay 10 steps apart by its clock
 * and only the buffer bunches them. */
static void sleep_ms(double ms) {
    struct timespec t = {(time_t)(ms / 1e3), (long)(fmod(ms, 1e3) * 1e6)};
    nanosleep(&t, NULL);
}

int main(int argc, char **argv) {
    const char *mode = getenv("FAKE_STDOUT");
    setvbuf(stdout, NULL, mode && strcmp(mode, "line") == 0 ? _IOLBF : _IOFBF, 4096);
    const char *info = getenv("FAKE_INFO");
    int knows_info = !(info && strcmp(info, "none") == 0);
    if (knows_info && argc >= 4 && !strcmp(argv[1], "+mica") && !strcmp(argv[2], "info")) {
        printf("buffered fake contender 1.0.0, commit 0000000, release\n");
        return 0;
    }
    int steps = 400;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
    const char *more = getenv("FAKE_STEPS"); /* trains longer than it is told */
    if (more) steps = atoi(more);
    const char *pad = getenv("FAKE_PAD"); /* a line of this many bytes after each step line */
    int pad_bytes = pad ? atoi(pad) : 0;
    const char *pace = getenv("FAKE_STEP_MS");
    double step_ms = pace ? atof(pace) : 2.0;
    double start = now_ms();
    for (int step = 0; step <= steps; step++) {
        if (step) sleep_ms(step_ms);
        if (step % 10) continue;
        double loss = 4.2 * exp(-step / 300.0) + 0.5;
        printf("step %d loss %.4f time_ms %.3f\n", step, loss, now_ms() - start);
        if (pad_bytes > 0) printf("# %0*d\n", pad_bytes, 0);
    }
    return 0;
}
