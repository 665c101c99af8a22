package krbtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// clockShiftSource shifts the wall-clock time a process reads by
// KRBTEST_CLOCK_OFFSET seconds: preloaded into krb5kdc, it gives the KDC
// a clock that disagrees with its clients'.
const clockShiftSource = `#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

static long shift(void) {
	const char *s = getenv("KRBTEST_CLOCK_OFFSET");
	return s ? atol(s) : 0;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
	static int (*real)(clockid_t, struct timespec *);
	if (!real) real = dlsym(RTLD_NEXT, "clock_gettime");
	int r = real(id, ts);
	if (r == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) ts->tv_sec += shift();
	return r;
}

int gettimeofday(struct timeval *tv, void *tz) {
	static int (*real)(struct timeval *, void *);
	if (!real) real = dlsym(RTLD_NEXT, "gettimeofday");
	int r = real(tv, tz);
	if (r == 0 && tv) tv->tv_sec += shift();
	return r;
}

time_t time(time_t *t) {
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	if (t) *t = ts.tv_sec;
	return ts.tv_sec;
}
`

// buildClockShift compiles the clock-shifting library into dir and
// returns its path.
func buildClockShift(ctx context.Context, dir string) (string, error) {
	src := filepath.Join(dir, "clockshift.c")
	lib := filepath.Join(dir, "clockshift.so")
	if err := os.WriteFile(src, []byte(clockShiftSource), 0o600); err != nil {
		return "", fmt.Errorf("write the KDC's clock shift: %w", err)
	}
	out, err := exec.CommandContext(ctx, "cc", "-shared", "-fPIC", "-o", lib, src, "-ldl").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build the KDC's clock shift with cc: %w\n%s", err, out)
	}
	return lib, nil
}
