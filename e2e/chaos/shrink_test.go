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

// torchShrink is elasticShrink for PyTorch: e2e/torchshrink, a
// DistributedDataParallel model over gloo whose survivors re-form their
// process group with spindle.torch.reform and catch_up.
func torchShrink() fault {
	f := elasticShrink()
	f.name = "PyTorch elastic: DDP rank of 4 (no input)"
	f.args = func(string, string) []string {
		return []string{"submit", "--master", "local[4]", "--conf", "spindle.log.level=warn", "--num-executors", "2:4",
			"--conf", "spindle.failure.policy=elastic", "--conf", "spindle.failure.shrinkInPlace=true",
			"--", python, torchShrinkScript, "--steps", "400", "--pause", "0.02", "--ddp"}
	}
	f.victims = func(*exec.Cmd) []int { return pids(python, torchShrinkScript) }
	f.ready = regexp.MustCompile(`(?s)(torchshrink joined .*){4}`)
	f.trained = regexp.MustCompile(`(?s)(torchshrink went on .*){3}`)
	joined := regexp.MustCompile(`torchshrink joined pid=(\d+) rank=\d+ world=4`)
	wentOn := regexp.MustCompile(`torchshrink went on pid=(\d+) rank=\d+ world=3`)
	final := regexp.MustCompile(`torchshrink final pid=(\d+) rank=\d+ world=3 steps=400 params_sha256=([0-9a-f]+)`)
	f.check = func(stdout string) error {
		if err := wentOnInPlace(stdout, joined, wentOn, final); err != nil {
			return err
		}
		models := map[string]bool{}
		for _, m := range final.FindAllStringSubmatch(stdout, -1) {
			models[m[2]] = true
		}
		if len(models) != 1 {
			return fmt.Errorf("the survivors ended with %d different models, want 1", len(models))
		}
		return nil
	}
	return f
}

// torchRestart is torchShrink without spindle.failure.shrinkInPlace, its
// baseline: the gang restarts with 3 new processes that start over (the
// job saves no checkpoint). Its recovery is the three joining their world.
func torchRestart() fault {
	f := withoutShrinkInPlace(torchShrink())
	f.name = "PyTorch elastic gang restarted: DDP rank of 4 (no input)"
	final := regexp.MustCompile(`torchshrink final pid=\d+ rank=\d+ world=3 steps=400 `)
	f.check = func(stdout string) error {
		if got := final.FindAllStringSubmatch(stdout, -1); len(got) != 3 {
			return fmt.Errorf("%d final lines in a world of 3, want 3", len(got))
		}
		return nil
	}
	f.trained = regexp.MustCompile(`(?s)(torchshrink joined pid=\d+ rank=\d+ world=3.*){3}`)
	return f
}

// shrunkInPlace checks that three of the four processes that joined went
// on in the world of 3 and finished every step there: no process started
// again, none restarted.
func shrunkInPlace(stdout string) error {
	return wentOnInPlace(stdout, shrinkJoined, shrinkWentOn, shrinkFinal)
}

// wentOnInPlace is shrunkInPlace for a program's lines: joined, wentOn
// and final each capture the process's pid first.
func wentOnInPlace(stdout string, joinedLine, wentOn, final *regexp.Regexp) error {
	var joined []string
	for _, m := range joinedLine.FindAllStringSubmatch(stdout, -1) {
		joined = append(joined, m[1])
	}
	if len(joined) != 4 {
		return fmt.Errorf("%d processes joined a world of 4, want 4 (a rank was started again)", len(joined))
	}
	for _, re := range []*regexp.Regexp{wentOn, final} {
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
	f := withoutShrinkInPlace(elasticShrink())
	f.name = "elastic gang restarted: allreducing rank of 4 (no input)"
	f.check = restartedSmaller
	f.trained = regexp.MustCompile(`(?s)(shrinkcheck joined pid=\d+ rank=\d+ world=3.*){3}`)
	return f
}

// withoutShrinkInPlace is f's job without spindle.failure.shrinkInPlace:
// a lost rank restarts the gang smaller.
func withoutShrinkInPlace(f fault) fault {
	f.alone = false
	args := f.args
	f.args = func(dir, data string) []string {
		a := args(dir, data)
		i := slices.Index(a, "spindle.failure.shrinkInPlace=true")
		return slices.Delete(a, i-1, i+1)
	}
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
