/* kbatch's one SIGBUS handler: guarded reads of a mapping, and zero-copy
 * mappings that must survive the truncation of their file.
 *
 * Included ONLY by _mapguard.pyx. Every other module reaches it through
 * `from kbatch._core._mapguard cimport kb_guarded_call, kb_guarded_copy`, so
 * the process has one handler, one registry and one per-thread jump pointer
 * (a second copy of this header in another extension would install a second
 * handler that knows nothing of the first one's state).
 *
 * A SIGBUS is handled in this order:
 *
 *   1. this thread is inside kbg_call (a guarded read):  siglongjmp back, the
 *      call returns KBG_FAULTED (the read raises FileChangedError);
 *   2. a page fault (BUS_ADRERR) whose address lies in a registered mapping:
 *      anonymous zero pages replace [faulting page, end of the mapping), the
 *      slot is marked invalidated, and the handler returns so the access is
 *      retried (it then reads zeros);
 *   3. anything else: the handler that was installed before kbatch's (called
 *      directly, SA_SIGINFO or not); SIG_DFL/SIG_IGN for a fault: the default
 *      action is restored and the fault repeats (the process dies of SIGBUS,
 *      as it would without kbatch). If the chain comes back to this handler
 *      (faulthandler enabled after kbatch restores kbatch's handler and
 *      re-raises), the default action ends it, never a loop. Such a re-raise
 *      from inside another handler (on the alternate signal stack, while
 *      mappings are registered) returns instead: the fault repeats and comes
 *      to this handler with its address (x86-64 and aarch64).
 *
 * Registry: KBG_SLOTS fixed slots, lock-free. A slot is FREE -> CLAIMED
 * (being written) -> LIVE (-> INVALID) -> RETIRING -> FREE. The handler
 * increments a slot's `users` before it reads its state and range;
 * unregistering moves the state to RETIRING and waits for `users` to be 0,
 * so once kbg_unregister returns no handler is touching the range and the
 * caller may unmap it (both sides sequentially consistent: either the
 * handler sees RETIRING, or the unregistering thread sees users > 0).
 * A full table: kbg_register returns -1 (the caller reads in copy mode).
 */
#ifndef KBATCH_GUARD_H
#define KBATCH_GUARD_H

#ifndef KBATCH_GUARD_IMPLEMENTATION
#error "_guard.h belongs to _mapguard.pyx only: cimport kb_guarded_call/kb_guarded_copy from kbatch._core._mapguard"
#endif

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#define KBG_FAULTED (-1000)
#define KBG_SLOTS 4096

typedef int (*kbg_fn)(void *arg);

/* --- the registry ---------------------------------------------------------- */

enum { KBG_FREE = 0, KBG_CLAIMED = 1, KBG_LIVE = 2, KBG_INVALID = 3, KBG_RETIRING = 4 };

struct kbg_slot {
    int state;          /* atomic */
    int users;          /* atomic: handlers looking at this slot */
    uintptr_t start;    /* page aligned */
    uintptr_t end;      /* page aligned, exclusive */
    int prot;
};

static struct kbg_slot kbg_table[KBG_SLOTS];
static int kbg_high = 0;          /* atomic: slots [0, kbg_high) were ever used */
static uintptr_t kbg_page = 4096; /* set before the first registration */

#define KBG_LOAD(p) __atomic_load_n((p), __ATOMIC_SEQ_CST)
#define KBG_STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_SEQ_CST)
#define KBG_ADD(p, v) __atomic_add_fetch((p), (v), __ATOMIC_SEQ_CST)
#define KBG_CAS(p, expected, desired) \
    __atomic_compare_exchange_n((p), (expected), (desired), 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)

/* --- the handler and what it chains to --------------------------------------- */

/* volatile, and fenced by compiler barriers around fn(arg): when fn is
   inlined (kbg_copy's memcpy), the compiler would otherwise see the store of
   the jump buffer as dead and drop it, and the SIGBUS would find no guard. */
static __thread sigjmp_buf *volatile kbg_jump = NULL;
static __thread volatile int kbg_chaining = 0;
#define KBG_BARRIER() __asm__ __volatile__("" ::: "memory")

static struct sigaction kbg_prev[2];     /* the handler before ours */
static int kbg_prev_at = 0;              /* atomic: which one is current */
static pthread_mutex_t kbg_install_lock = PTHREAD_MUTEX_INITIALIZER;
static int kbg_installs = 0;             /* atomic: how many times installed */

static void kbg_handler(int sig, siginfo_t *info, void *context);

/* Replace [page of addr, end) of a registered mapping with zero pages.
   1 when addr was in a registered mapping (and the pages were replaced). */
static int kbg_patch(uintptr_t addr) {
    int high = KBG_LOAD(&kbg_high);
    for (int i = 0; i < high; i++) {
        struct kbg_slot *s = &kbg_table[i];
        KBG_ADD(&s->users, 1);
        int state = KBG_LOAD(&s->state);
        if ((state == KBG_LIVE || state == KBG_INVALID) && addr >= s->start && addr < s->end) {
            uintptr_t page = addr & ~(kbg_page - 1);
            void *r = mmap((void *)page, s->end - page, s->prot,
                           MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (r != MAP_FAILED) {
                int live = KBG_LIVE;
                KBG_CAS(&s->state, &live, KBG_INVALID);
            }
            KBG_ADD(&s->users, -1);
            return r != MAP_FAILED;
        }
        KBG_ADD(&s->users, -1);
    }
    return 0;
}

/* The default action: restored, then the fault repeats on return (or, for a
   signal someone sent, is raised again now: SA_NODEFER delivers it at once). */
static void kbg_default(int sig, siginfo_t *info) {
    struct sigaction dfl;
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    if (info == NULL || info->si_code <= 0) {
        raise(sig);
    }
}

static int kbg_live_count(void);

/* Whether the interrupted code ran on this thread's alternate signal stack,
   that is inside another signal handler (faulthandler's runs there). */
static int kbg_interrupted_in_handler(void *context) {
    stack_t ss;
    if (context == NULL || sigaltstack(NULL, &ss) != 0 || (ss.ss_flags & SS_DISABLE)) {
        return 0;
    }
#if defined(__x86_64__) && defined(REG_RSP)
    uintptr_t sp = (uintptr_t)((ucontext_t *)context)->uc_mcontext.gregs[REG_RSP];
#elif defined(__aarch64__)
    uintptr_t sp = (uintptr_t)((ucontext_t *)context)->uc_mcontext.sp;
#else
    uintptr_t sp = 0;
    return 0;
#endif
    return sp >= (uintptr_t)ss.ss_sp && sp < (uintptr_t)ss.ss_sp + ss.ss_size;
}

static void kbg_chain(int sig, siginfo_t *info, void *context) {
    if (kbg_chaining) {          /* the chain came back to us */
        kbg_default(sig, info);
        return;
    }
    /* A handler installed over ours after a mapping was registered
       (faulthandler.enable() later on) saw the fault first, put ours back and
       raised the signal again from its own frame on the alternate stack: the
       fault itself is still pending. Return, and the faulting access repeats
       and reaches this handler with its address (patched when it is ours,
       chained otherwise). A SIGBUS sent by kill(), from ordinary code, is
       not absorbed. */
    if (info != NULL && (info->si_code == SI_TKILL || info->si_code == SI_USER)
            && info->si_pid == getpid() && kbg_live_count() > 0
            && kbg_interrupted_in_handler(context)) {
        return;
    }
    struct sigaction *prev = &kbg_prev[KBG_LOAD(&kbg_prev_at)];
    int fault = info != NULL && info->si_code > 0;
    if (prev->sa_flags & SA_SIGINFO) {
        if (prev->sa_sigaction == kbg_handler || prev->sa_sigaction == NULL) {
            kbg_default(sig, info);
            return;
        }
        kbg_chaining = 1;
        prev->sa_sigaction(sig, info, context);
        kbg_chaining = 0;
    } else if (prev->sa_handler == SIG_DFL || (prev->sa_handler == SIG_IGN && fault)) {
        kbg_default(sig, info);
    } else if (prev->sa_handler != SIG_IGN) {
        kbg_chaining = 1;
        prev->sa_handler(sig);
        kbg_chaining = 0;
    }
}

static void kbg_handler(int sig, siginfo_t *info, void *context) {
    int saved_errno = errno;
    sigjmp_buf *jump = kbg_jump;
    if (jump != NULL) {
        kbg_jump = NULL;
        siglongjmp(*jump, 1);
    }
    if (info != NULL && info->si_code == BUS_ADRERR && kbg_patch((uintptr_t)info->si_addr)) {
        errno = saved_errno;
        return;                  /* the access is retried: it reads zeros */
    }
    kbg_chain(sig, info, context);
    errno = saved_errno;
}

/* Ours on top of whatever is installed now (kept as the one to chain to);
   nothing when ours already is. Thread-safe; not for signal handlers. */
static void kbg_install(void) {
    struct sigaction current;
    if (sigaction(SIGBUS, NULL, &current) == 0 && (current.sa_flags & SA_SIGINFO)
            && current.sa_sigaction == kbg_handler) {
        return;
    }
    pthread_mutex_lock(&kbg_install_lock);
    if (sigaction(SIGBUS, NULL, &current) == 0 && !((current.sa_flags & SA_SIGINFO)
            && current.sa_sigaction == kbg_handler)) {
        int next = 1 - KBG_LOAD(&kbg_prev_at);
        kbg_prev[next] = current;
        KBG_STORE(&kbg_prev_at, next);
        struct sigaction action;
        memset(&action, 0, sizeof(action));
        action.sa_sigaction = kbg_handler;
        action.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
        sigemptyset(&action.sa_mask);
        if (sigaction(SIGBUS, &action, NULL) == 0) {
            KBG_ADD(&kbg_installs, 1);
        }
    }
    pthread_mutex_unlock(&kbg_install_lock);
}

/* --- guarded reads --------------------------------------------------------- */

/* fn(arg), or KBG_FAULTED when a SIGBUS interrupted it. */
static int kbg_call(kbg_fn fn, void *arg) {
    sigjmp_buf jump;
    sigjmp_buf *volatile saved = kbg_jump;
    kbg_install();
    if (sigsetjmp(jump, 1) != 0) {
        kbg_jump = saved;
        return KBG_FAULTED;
    }
    kbg_jump = &jump;
    KBG_BARRIER();
    int result = fn(arg);
    KBG_BARRIER();
    kbg_jump = saved;
    return result;
}

struct kbg_copy_args { void *dst; const void *src; size_t n; };

static int kbg_copy_fn(void *arg) {
    struct kbg_copy_args *a = (struct kbg_copy_args *)arg;
    memcpy(a->dst, a->src, a->n);
    return 0;
}

/* memcpy from a mapping, guarded: 0, or KBG_FAULTED. */
static int kbg_copy(void *dst, const void *src, size_t n) {
    struct kbg_copy_args args = {dst, src, n};
    return kbg_call(kbg_copy_fn, &args);
}

/* --- registering mappings ---------------------------------------------------- */

/* A slot for [start, start + length) (widened to whole pages), or -1 when the
   table is full. Installs the handler. */
static int kbg_register(uintptr_t start, size_t length, int prot) {
    long page = sysconf(_SC_PAGESIZE);
    if (page > 0) {
        kbg_page = (uintptr_t)page;
    }
    kbg_install();
    uintptr_t first = start & ~(kbg_page - 1);
    uintptr_t end = (start + length + kbg_page - 1) & ~(kbg_page - 1);
    for (int i = 0; i < KBG_SLOTS; i++) {
        struct kbg_slot *s = &kbg_table[i];
        int expected = KBG_FREE;
        if (KBG_LOAD(&s->state) == KBG_FREE && KBG_CAS(&s->state, &expected, KBG_CLAIMED)) {
            s->start = first;
            s->end = end;
            s->prot = prot;
            int high = KBG_LOAD(&kbg_high);
            while (high < i + 1 && !KBG_CAS(&kbg_high, &high, i + 1)) {
            }
            KBG_STORE(&s->state, KBG_LIVE);
            return i;
        }
    }
    return -1;
}

/* Mark a live slot invalidated and (when lost_from < end) replace its pages
   from lost_from on with zeros: the proactive path, once fstat shows the file
   shrank. 0, or -1 when mmap failed. */
static int kbg_invalidate(int slot, uintptr_t lost_from) {
    struct kbg_slot *s = &kbg_table[slot];
    int r = 0;
    lost_from = (lost_from + kbg_page - 1) & ~(kbg_page - 1);
    if (lost_from < s->start) {
        lost_from = s->start;
    }
    if (lost_from < s->end) {
        void *m = mmap((void *)lost_from, s->end - lost_from, s->prot,
                       MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        r = m == MAP_FAILED ? -1 : 0;
    }
    int live = KBG_LIVE;
    KBG_CAS(&s->state, &live, KBG_INVALID);
    return r;
}

static int kbg_invalidated(int slot) {
    return KBG_LOAD(&kbg_table[slot].state) == KBG_INVALID;
}

/* Free a slot; when it returns, no handler touches the range any more. */
static void kbg_unregister(int slot) {
    struct kbg_slot *s = &kbg_table[slot];
    int state = KBG_LOAD(&s->state);
    while ((state == KBG_LIVE || state == KBG_INVALID) && !KBG_CAS(&s->state, &state, KBG_RETIRING)) {
    }
    while (KBG_LOAD(&s->users) != 0) {
        sched_yield();
    }
    KBG_STORE(&s->state, KBG_FREE);
}

static int kbg_live_count(void) {
    int n = 0, high = KBG_LOAD(&kbg_high);
    for (int i = 0; i < high; i++) {
        int state = KBG_LOAD(&kbg_table[i].state);
        n += state == KBG_LIVE || state == KBG_INVALID;
    }
    return n;
}

static int kbg_installed(void) {
    struct sigaction current;
    return sigaction(SIGBUS, NULL, &current) == 0 && (current.sa_flags & SA_SIGINFO)
        && current.sa_sigaction == kbg_handler;
}

#endif
