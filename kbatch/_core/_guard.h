/* A guard against SIGBUS while reading a memory-mapped file.
 *
 * If a mapped segment is truncated (or replaced) while kbatch decodes it,
 * touching a page past the new end raises SIGBUS, which would kill the
 * interpreter. kb_guarded_call(fn, arg) runs fn(arg) with this thread's guard
 * armed: a SIGBUS inside it jumps back and the call returns KB_FAULTED
 * instead. A SIGBUS anywhere else gets the default action (the process dies,
 * as it would without kbatch).
 *
 * The handler is (re)installed at every guarded call when another one (such as
 * Python's faulthandler) has replaced it. State is per thread.
 */
#ifndef KBATCH_GUARD_H
#define KBATCH_GUARD_H

#include <setjmp.h>
#include <signal.h>
#include <string.h>

#define KB_FAULTED (-1000)

typedef int (*kb_guarded_fn)(void *arg);

/* volatile, and fenced by compiler barriers around fn(arg): when fn is
   inlined (kb_guarded_copy's memcpy), the compiler would otherwise see the
   store of the jump buffer as dead (overwritten right after the copy) and
   drop it, and the SIGBUS would find no guard armed. */
static __thread sigjmp_buf *volatile kb_guard_jump = NULL;
#define KB_BARRIER() __asm__ __volatile__("" ::: "memory")

static void kb_bus_handler(int sig, siginfo_t *info, void *context) {
    (void)info;
    (void)context;
    sigjmp_buf *jump = kb_guard_jump;
    if (jump != NULL) {
        kb_guard_jump = NULL;
        siglongjmp(*jump, 1);
    }
    /* not a guarded read: fall back to the default action when the faulting
       access is retried */
    signal(sig, SIG_DFL);
}

static void kb_guard_install(void) {
    struct sigaction current;
    if (sigaction(SIGBUS, NULL, &current) == 0 && (current.sa_flags & SA_SIGINFO)
            && current.sa_sigaction == kb_bus_handler) {
        return;
    }
    struct sigaction action;
    memset(&action, 0, sizeof(action));
    action.sa_sigaction = kb_bus_handler;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    sigaction(SIGBUS, &action, NULL);
}

/* fn(arg), or KB_FAULTED when a SIGBUS interrupted it. */
static int kb_guarded_call(kb_guarded_fn fn, void *arg) {
    sigjmp_buf jump;
    sigjmp_buf *volatile saved = kb_guard_jump;
    kb_guard_install();
    if (sigsetjmp(jump, 1) != 0) {
        kb_guard_jump = saved;
        return KB_FAULTED;
    }
    kb_guard_jump = &jump;
    KB_BARRIER();
    int result = fn(arg);
    KB_BARRIER();
    kb_guard_jump = saved;
    return result;
}

/* memcpy from a mapping, guarded: 0, or KB_FAULTED. */
struct kb_copy_args { void *dst; const void *src; size_t n; };

static int kb_copy_fn(void *arg) {
    struct kb_copy_args *a = (struct kb_copy_args *)arg;
    memcpy(a->dst, a->src, a->n);
    return 0;
}

static int kb_guarded_copy(void *dst, const void *src, size_t n) {
    struct kb_copy_args args = {dst, src, n};
    return kb_guarded_call(kb_copy_fn, &args);
}

#endif
