"""Tests of the tests' own timing helpers (support.Budget, support.wait_for)."""

import unittest
from unittest import mock

import support


class BudgetTest(unittest.TestCase):
    def test_load_stretches_the_budget_as_it_comes(self):
        """Time at twice the quiet load costs half; an idle machine does not lengthen the budget."""
        clock = [100.0]
        stretch = [2.0]
        with mock.patch.object(support.time, "monotonic", lambda: clock[0]), \
                mock.patch.object(support, "load_stretch", lambda: stretch[0]), \
                mock.patch.dict("os.environ", SPINDLE_TEST_TIMESCALE="1"):
            b = support.Budget(60)
            clock[0] += 80
            self.assertFalse(b.spent(), "80 s at stretch 2 is 40 s of a 60 s budget")
            stretch[0] = 1.0
            clock[0] += 15
            self.assertFalse(b.spent(), "55 s of 60 s spent")
            self.assertEqual(str(b), "60s (95.0s on the wall clock: the machine was busy)")
            clock[0] += 5
            self.assertTrue(b.spent())

    def test_timescale_lengthens_it(self):
        with mock.patch.dict("os.environ", SPINDLE_TEST_TIMESCALE="3"):
            self.assertEqual(support.Budget(20).total, 60)
        with mock.patch.dict("os.environ", SPINDLE_TEST_TIMESCALE="fast"), \
                self.assertRaisesRegex(ValueError, "SPINDLE_TEST_TIMESCALE"):
            support.Budget(20)

    def test_wait_for_names_what_is_missing(self):
        with mock.patch.dict("os.environ", SPINDLE_TEST_LOAD_STRETCH="off"), \
                self.assertRaisesRegex(AssertionError, r"timed out after 0.05s waiting for rank 3's line"):
            support.wait_for(lambda: "rank 3's line", lambda: False, 0.05)


if __name__ == "__main__":
    unittest.main()
