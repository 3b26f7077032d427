#include "tools/common/interrupt.h"

#include <signal.h>
#include <string.h>

/* The one mutable global of the CLI's writers: a signal handler can only reach static storage,
 * and volatile sig_atomic_t is the type it may write (C17 7.14.1.1). 0, or the signal. */
static volatile sig_atomic_t g_signal;

static void on_signal(int sig) { g_signal = sig; }

void sl_cli_interrupt_catch(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    /* SA_RESTART: a write cut short by the signal goes on (the flag is asked before the next);
     * SA_RESETHAND: a second signal takes its default action */
    sa.sa_flags = SA_RESTART | SA_RESETHAND;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

bool sl_cli_interrupted(void *user)
{
    (void)user;
    return g_signal != 0;
}

int sl_cli_interrupt_status(void) { return g_signal ? 128 + g_signal : 0; }

const char *sl_cli_interrupt_name(void)
{
    return g_signal == SIGINT ? "SIGINT" : g_signal == SIGTERM ? "SIGTERM" : g_signal ? "a signal"
                                                                                     : "";
}
