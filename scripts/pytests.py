"""Run the Python package's unittest suites and count them honestly.

make test-python runs the suites in three interpreters (system Python,
the test venv, the py venv), each able to run what the others skip for a
missing package. A test skipped in one interpreter but run in another
was run. So each run records every test's outcome (run mode), and the
summary (summarize mode) counts per test id: skipped only when no
interpreter ran it, and apart from those the skips whose reason says
another tier of make test runs them ("run by go test ...").

    pytests.py run RESULTS LABEL [TEST NAMES...]   # in python/tests; none: discover
    pytests.py summarize SUMMARY TIMES RESULTS...  # appends the tier line

Each test's record also holds its wall seconds and the CPU seconds of
the interpreter and the children it waited for (the ranks and jobs it
ran); summarize writes them to TIMES, the longest first, as the Go
tiers' times files.
"""

import json
import resource
import sys
import time
import unittest

ELSEWHERE = "run by go test"


class RecordingResult(unittest.TextTestResult):
    """A text result that also appends (test id, outcome, skip reason) to the results file as each test ends."""

    sink = None  # (file, interpreter label), set by run

    def startTest(self, test):
        self._began = (time.monotonic(), cpu_seconds())
        super().startTest(test)

    def _record(self, test, outcome, reason="", err=None):
        f, label = self.sink
        r = {"id": test.id(), "outcome": outcome, "reason": reason, "interpreter": label}
        if hasattr(self, "_began"):
            r["seconds"] = round(time.monotonic() - self._began[0], 2)
            r["cpu"] = round(cpu_seconds() - self._began[1], 2)
        if err is not None:
            r["said"] = said(self._exc_info_to_string(err, test))
        f.write(json.dumps(r) + "\n")
        f.flush()

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test, "pass")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "fail", err=err)

    def addError(self, test, err):
        super().addError(test, err)
        self._record(test, "fail", err=err)

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record(test, "skip", reason)

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            # A failed subtest fails its test, which then gets no addSuccess.
            self._record(test, "fail", err=err)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._record(test, "pass")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._record(test, "fail")


# Most lines of a failure's traceback the summary repeats: its end, where
# the assertion or exception is. The summary ends make test's output,
# which may be all a CI page shows.
SAID_LINES = 8
# Most failed tests the summary says why of (as scripts/testreport's).
MOST_FAILURES = 10


def cpu_seconds():
    """Return the user and system seconds of this interpreter and of the children it has waited for."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def said(text):
    """Return the last SAID_LINES non-blank lines of a traceback, each cut at 240 characters."""
    lines = [l[:240] for l in text.rstrip().splitlines() if l.strip()]
    return lines[-SAID_LINES:]


# A run's first and last records: a run that started and did not end
# (an interpreter that crashed, or a KeyboardInterrupt that escaped a
# test) fails the tier even where every test it finished passed.
STARTED, ENDED = "started", "ended"


def run(results, label, names):
    sys.path.insert(0, ".")
    with open(results, "a", encoding="utf-8") as f:
        f.write(json.dumps({"interpreter": label, "outcome": STARTED}) + "\n")
        f.flush()
        RecordingResult.sink = (f, label)
        loader = unittest.TestLoader()
        suite = loader.loadTestsFromNames(names) if names else loader.discover(".")
        result = unittest.TextTestRunner(resultclass=RecordingResult).run(suite)
        f.write(json.dumps({"interpreter": label, "outcome": ENDED}) + "\n")
    return 0 if result.wasSuccessful() else 1


def summarize(summary, times, files):
    outcomes = {}  # test id -> {outcome: reason}
    took = []  # (seconds, cpu seconds, "interpreter:test id") of each test run
    runs = set()  # (interpreter, test id) of the tests run
    interpreters = set()
    unended = set()  # interpreters whose run did not reach its end
    why = {}  # test id -> (interpreter, the end of its first failure's traceback)
    for path in files:
        try:
            with open(path, encoding="utf-8") as f:
                lines = f.readlines()
        except FileNotFoundError:
            continue
        for line in lines:
            r = json.loads(line)
            interpreters.add(r["interpreter"])
            if r["outcome"] == STARTED:
                unended.add(r["interpreter"])
                continue
            if r["outcome"] == ENDED:
                unended.discard(r["interpreter"])
                continue
            if r["outcome"] != "skip":
                runs.add((r["interpreter"], r["id"]))
                if "seconds" in r:
                    took.append((r["seconds"], r.get("cpu", 0), "%s:%s" % (r["interpreter"], r["id"])))
            if r["outcome"] == "fail":
                why.setdefault(r["id"], (r["interpreter"], r.get("said", [])))
            outcomes.setdefault(r["id"], {})[r["outcome"]] = r["reason"]
    ran = [t for t, o in outcomes.items() if "pass" in o or "fail" in o]
    failed = [t for t, o in outcomes.items() if "fail" in o]
    skipped = {t: o["skip"] for t, o in outcomes.items() if t not in ran}
    elsewhere = [t for t, why in skipped.items() if ELSEWHERE in why]
    here = sorted(t for t in skipped if t not in elsewhere)
    verdict = "FAILED" if failed or unended else "ok"
    line = "tier %-7s %-6s %5d tests run, %d failed, %d skipped (unittest: %d runs in %d interpreters; %d more run by the unit tier)\n" % (
        "python", verdict, len(ran), len(failed), len(here), len(runs), len(interpreters), len(elsewhere))
    with open(summary, "a", encoding="utf-8") as f:
        f.write(line)
        if here:
            f.write("             skipped: %s\n" % ", ".join("%s (%s)" % (t, skipped[t]) for t in here))
        for label in sorted(unended):
            f.write("             the %s run ended before its tests did (its output says why)\n" % label)
        for t in sorted(failed)[:MOST_FAILURES]:
            label, lines = why[t]
            f.write("             failed: %s (%s)\n" % (t, label))
            f.writelines("               %s\n" % l for l in lines)
        if len(failed) > MOST_FAILURES:
            f.write("             and %d more failed (the tier's output has them)\n" % (len(failed) - MOST_FAILURES))
    with open(times, "w", encoding="utf-8") as f:
        f.writelines("%8.2f %8.2f %s\n" % t for t in sorted(took, reverse=True))
    sys.stdout.write(line)
    return 1 if failed or unended else 0


def main(argv):
    if len(argv) >= 3 and argv[0] == "run":
        return run(argv[1], argv[2], argv[3:])
    if len(argv) >= 3 and argv[0] == "summarize":
        return summarize(argv[1], argv[2], argv[3:])
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
