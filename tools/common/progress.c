#include "tools/common/progress.h"

#include <stdio.h>
#include <unistd.h>

#include "tools/common/cli.h"

void sl_cli_progress_start(sl_cli_progress *p, const char *what)
{
    p->what = what;
    p->tty = isatty(STDERR_FILENO) == 1;
    p->drawn = false;
    p->t0_s = p->last_s = sl_cli_now_s();
}

void sl_cli_progress_update(void *user, uint64_t done, uint64_t total)
{
    sl_cli_progress *p = user;
    if (!p->tty || !total) return;
    const double now = sl_cli_now_s();
    if (done < total && now - p->last_s < 0.1) return;
    p->last_s = now;
    const double el = now - p->t0_s, mib = (double)done / 1048576.0;
    fprintf(stderr, "\r%s: %3d%% (%.0f / %.0f MiB, %.1f s, %.0f MiB/s)  ", p->what,
            (int)(done * 100 / total), mib, (double)total / 1048576.0, el,
            el > 0 ? mib / el : 0.0);
    fflush(stderr);
    p->drawn = true;
}

void sl_cli_progress_end(sl_cli_progress *p)
{
    if (p->drawn) fprintf(stderr, "\r%78s\r", "");
    p->drawn = false;
}
