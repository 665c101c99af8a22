"""Run the Python package's unittest suites and count them honestly.

make test-python runs the suites in three interpreters (system Python,
the test venv, the py venv), each able to run what the others skip for a
missing package. A test skipped in one interpreter but run in another
was run. So each run records every test's outcome (run mode), and the
summary (summarize mode) counts per test id: skipped only when no
interpreter ran it, and apart from those the skips whose reason says
another tier of make test runs them ("run by go test ...").

    pytests.py run RESULTS LABEL [TEST NAMES...]   # in python/tests; none: discover
    pytests.py summarize SUMMARY RESULTS...        # appends the tier line
"""

import json
import sys
import unittest

ELSEWHERE = "run by go test"


class RecordingResult(unittest.TextTestResult):
    """A text result that also keeps (test id, outcome, skip reason)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.records = []

    def _record(self, test, outcome, reason=""):
        self.records.append({"id": test.id(), "outcome": outcome, "reason": reason})

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test, "pass")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "fail")

    def addError(self, test, err):
        super().addError(test, err)
        self._record(test, "fail")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record(test, "skip", reason)

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            # A failed subtest fails its test, which then gets no addSuccess.
            self._record(test, "fail")

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._record(test, "pass")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._record(test, "fail")


def run(results, label, names):
    sys.path.insert(0, ".")
    loader = unittest.TestLoader()
    suite = loader.loadTestsFromNames(names) if names else loader.discover(".")
    result = unittest.TextTestRunner(resultclass=RecordingResult).run(suite)
    with open(results, "a", encoding="utf-8") as f:
        for r in result.records:
            f.write(json.dumps(dict(r, interpreter=label)) + "\n")
    return 0 if result.wasSuccessful() else 1


def summarize(summary, files):
    outcomes = {}  # test id -> {outcome: reason}
    runs = set()  # (interpreter, test id) of the tests run
    interpreters = set()
    for path in files:
        try:
            with open(path, encoding="utf-8") as f:
                lines = f.readlines()
        except FileNotFoundError:
            continue
        for line in lines:
            r = json.loads(line)
            if r["outcome"] != "skip":
                runs.add((r["interpreter"], r["id"]))
            interpreters.add(r["interpreter"])
            outcomes.setdefault(r["id"], {})[r["outcome"]] = r["reason"]
    ran = [t for t, o in outcomes.items() if "pass" in o or "fail" in o]
    failed = [t for t, o in outcomes.items() if "fail" in o]
    skipped = {t: o["skip"] for t, o in outcomes.items() if t not in ran}
    elsewhere = [t for t, why in skipped.items() if ELSEWHERE in why]
    here = sorted(t for t in skipped if t not in elsewhere)
    verdict = "FAILED" if failed else "ok"
    line = "tier %-7s %-6s %5d tests run, %d failed, %d skipped (unittest: %d runs in %d interpreters; %d more run by the unit tier)\n" % (
        "python", verdict, len(ran), len(failed), len(here), len(runs), len(interpreters), len(elsewhere))
    with open(summary, "a", encoding="utf-8") as f:
        f.write(line)
        if here:
            f.write("             skipped: %s\n" % ", ".join("%s (%s)" % (t, skipped[t]) for t in here))
    sys.stdout.write(line)
    return 1 if failed else 0


def main(argv):
    if len(argv) >= 3 and argv[0] == "run":
        return run(argv[1], argv[2], argv[3:])
    if len(argv) >= 2 and argv[0] == "summarize":
        return summarize(argv[1], argv[2:])
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
