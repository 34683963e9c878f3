/* The outside clock's stamper (§5): the least work between a chunk's arrival and its stamp.

   micakit-stamp FD...   reads every FD as its data arrives and writes to stdout, per read, a
   record: a header of three native-endian fields (u32 the FD's place in the arguments, u32
   the chunk's length, u64 CLOCK_MONOTONIC in ns taken as read() returns) and the chunk.
   A length of 0 says that FD closed. It exits once every FD has closed. Its first record,
   of the source 2^32 - 1, says it is ready.

   The kit's reader process (kit/measure/clock.py) reads these records and does the rest
   (lines, long lines, Docker's frames, the logs); its own scheduling and its threads' turns
   at the interpreter lock then delay the writing of a stamp, never the stamp. Built with the
   wheel (setup.py); where it is not built the reader stamps in Python. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_FDS 16
#define READ_SIZE (1 << 20)

struct header {
    uint32_t source, length;
    uint64_t stamp_ns;
};

static int write_all(const char *data, size_t size) {
    while (size) {
        ssize_t put = write(1, data, size);
        if (put < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        data += put;
        size -= (size_t)put;
    }
    return 0;
}

/* The priority that wakes this process first as a chunk arrives: a real-time one (root or
   CAP_SYS_NICE; it only ever blocks in poll, so it cannot hog a core). Where none is had, a
   short slice: on an EEVDF kernel (Linux 6.12 on) a task asking for 0.1 ms slices preempts a
   CPU-bound neighbour as it wakes, without privileges. Elsewhere the calls fail and nothing
   changes. The reader process keeps an ordinary priority: it only writes. */
static void first_to_wake(void) {
    /* one above the priority a reader stamping in Python asks for (clock.py, _never_starved),
       so no other series' reader on the machine holds a core it needs */
    struct sched_param rt = {.sched_priority = 2};
    if (sched_setscheduler(0, SCHED_FIFO, &rt) == 0) return;
#ifdef SYS_sched_setattr
    struct {
        uint32_t size, policy;
        uint64_t flags;
        int32_t nice;
        uint32_t priority;
        uint64_t runtime, deadline, period;
    } attr;
    memset(&attr, 0, sizeof attr);
    attr.size = sizeof attr;
    attr.policy = SCHED_OTHER;
    attr.runtime = 100000;
    syscall(SYS_sched_setattr, 0, &attr, 0);
#endif
}

int main(int argc, char **argv) {
    static char buf[READ_SIZE];
    struct pollfd fds[MAX_FDS];
    int n = argc - 1, open_fds = n;
    if (n < 1 || n > MAX_FDS) return 2;
    for (int i = 0; i < n; i++) {
        fds[i].fd = atoi(argv[i + 1]);
        fds[i].events = POLLIN;
        /* blocking reads: a chunk is read whole as poll says it is there */
        fcntl(fds[i].fd, F_SETFL, fcntl(fds[i].fd, F_GETFL) & ~O_NONBLOCK);
    }
#ifdef F_SETPIPE_SZ
    /* room for the records while the reader process waits its turn */
    fcntl(1, F_SETPIPE_SZ, 1 << 20);
#endif
    first_to_wake();
    /* ready: a record of no source, once this process waits on its sources */
    struct timespec ts0;
    clock_gettime(CLOCK_MONOTONIC, &ts0);
    struct header ready = {UINT32_MAX, 0, (uint64_t)ts0.tv_sec * 1000000000ull + (uint64_t)ts0.tv_nsec};
    if (write_all((const char *)&ready, sizeof ready)) return 4;
    while (open_fds) {
        if (poll(fds, (nfds_t)n, -1) < 0) {
            if (errno == EINTR) continue;
            return 3;
        }
        for (int i = 0; i < n; i++) {
            if (fds[i].fd < 0 || !fds[i].revents) continue;
            ssize_t got = read(fds[i].fd, buf, READ_SIZE);
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            struct header h = {(uint32_t)i, got > 0 ? (uint32_t)got : 0,
                               (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec};
            /* a reset connection (Docker's attach socket) ends its stream like a close */
            if (write_all((const char *)&h, sizeof h) || (got > 0 && write_all(buf, (size_t)got)))
                return 4; /* the reader process is gone */
            if (got <= 0) {
                close(fds[i].fd);
                fds[i].fd = -1;
                open_fds--;
            }
        }
    }
    return 0;
}
