package chaos

import (
	"fmt"
	"os/exec"
	"regexp"
	"slices"
)

// The lines e2e/shrinkcheck prints: once its communicator formed, once it
// trained its first step in a smaller world, and at its end.
var (
	shrinkJoined = regexp.MustCompile(`shrinkcheck joined pid=(\d+) rank=\d+ world=4`)
	shrinkWentOn = regexp.MustCompile(`shrinkcheck went on pid=(\d+) rank=\d+ world=3`)
	shrinkFinal  = regexp.MustCompile(`shrinkcheck final pid=(\d+) rank=\d+ world=3 steps=400`)
	// shrinkAll marks the recovery: every survivor trained in the world of 3.
	shrinkAll = regexp.MustCompile(`(?s)(shrinkcheck went on .*){3}`)
)

// elasticShrink is an elastic job of 4 allreducing workers without input
// that goes on without a lost one in place (spindle.failure.shrinkInPlace):
// a training process is killed once the four joined; its recovery is the
// last survivor's first step in the world of 3.
func elasticShrink() fault {
	return fault{name: "elastic: allreducing rank of 4 (no input)", want: 4, recovers: true, alone: true, check: shrunkInPlace,
		args: func(string, string) []string {
			return []string{"submit", "--master", "local[4]", "--conf", "spindle.log.level=warn", "--num-executors", "2:4",
				"--conf", "spindle.failure.policy=elastic", "--conf", "spindle.failure.shrinkInPlace=true",
				"--", shrinkcheckBin, "--steps", "400", "--pause", "20ms"}
		},
		victims: func(*exec.Cmd) []int { return pids(shrinkcheckBin) },
		ready:   regexp.MustCompile(`(?s)(shrinkcheck joined .*){4}`),
		trained: shrinkAll,
	}
}

// shrunkInPlace checks that three of the four processes that joined went
// on in the world of 3 and finished every step there: no process started
// again, none restarted.
func shrunkInPlace(stdout string) error {
	var joined []string
	for _, m := range shrinkJoined.FindAllStringSubmatch(stdout, -1) {
		joined = append(joined, m[1])
	}
	if len(joined) != 4 {
		return fmt.Errorf("%d processes joined a world of 4, want 4 (a rank was started again)", len(joined))
	}
	for _, re := range []*regexp.Regexp{shrinkWentOn, shrinkFinal} {
		got := re.FindAllStringSubmatch(stdout, -1)
		if len(got) != 3 {
			return fmt.Errorf("%d lines match %s, want 3 (the survivors)", len(got), re)
		}
		for _, m := range got {
			if !slices.Contains(joined, m[1]) {
				return fmt.Errorf("process %s is not one of the four that joined: a survivor was restarted", m[1])
			}
		}
	}
	return nil
}

// elasticRestart is elasticShrink without spindle.failure.shrinkInPlace,
// its baseline: the gang restarts with the 3 survivors' ranks as new
// processes (from step 0: the job saves no checkpoint). Its recovery is
// the three new processes joining their world.
func elasticRestart() fault {
	f := elasticShrink()
	f.name = "elastic gang restarted: allreducing rank of 4 (no input)"
	f.alone, f.check = false, restartedSmaller
	args := f.args
	f.args = func(dir, data string) []string {
		a := args(dir, data)
		i := slices.Index(a, "spindle.failure.shrinkInPlace=true")
		return slices.Delete(a, i-1, i+1)
	}
	f.trained = regexp.MustCompile(`(?s)(shrinkcheck joined pid=\d+ rank=\d+ world=3.*){3}`)
	return f
}

// restartedSmaller checks that three new processes finished every step in
// the world of 3.
func restartedSmaller(stdout string) error {
	if got := shrinkFinal.FindAllStringSubmatch(stdout, -1); len(got) != 3 {
		return fmt.Errorf("%d final lines in a world of 3, want 3", len(got))
	}
	return nil
}
