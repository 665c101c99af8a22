package chaos

import (
	"fmt"
	"os/exec"
	"regexp"
	"slices"
)

// torchReplace4 is e2e/torchshrink on 4 ranks under the restart policy
// (a DistributedDataParallel model over gloo, without input), with extra
// settings.
func torchReplace4(extra ...string) func(string, string) []string {
	return func(string, string) []string {
		args := append([]string{"submit", "--master", "local[4]", "--conf", "spindle.log.level=warn",
			"--conf", "spindle.failure.policy=restart"}, extra...)
		return append(args, "--", python, torchShrinkScript, "--steps", "400", "--pause", "0.02", "--ddp")
	}
}

// torchReplaced is the PyTorch job that replaces a lost worker alone: the
// survivors re-form their group with the replacement (spindle.torch.reform)
// and hand it their model (catch_up). Its recovery is the kill until the
// replacement trained its first step, which every rank completes with it.
func torchReplaced() fault {
	joined := regexp.MustCompile(`torchshrink joined pid=(\d+) rank=\d+ world=4`)
	wentOn := regexp.MustCompile(`torchshrink went on pid=(\d+) rank=\d+ world=4`)
	replaced := regexp.MustCompile(`torchshrink replaced pid=(\d+) rank=\d+ world=4`)
	final := regexp.MustCompile(`torchshrink final pid=(\d+) rank=\d+ world=4 steps=400 params_sha256=([0-9a-f]+)`)
	return fault{name: "worker replaced: PyTorch DDP rank of 4 (no input)", want: 4, recovers: true, alone: true,
		args:    torchReplace4("--conf", "spindle.failure.replaceWorkers=true"),
		victims: func(*exec.Cmd) []int { return pids(python, torchShrinkScript) },
		ready:   regexp.MustCompile(`(?s)(torchshrink joined .*){4}`),
		trained: replaced,
		check: func(stdout string) error {
			var first []string
			for _, m := range joined.FindAllStringSubmatch(stdout, -1) {
				first = append(first, m[1])
			}
			rep := replaced.FindAllStringSubmatch(stdout, -1)
			if len(first) != 5 || len(rep) != 1 {
				return fmt.Errorf("%d processes joined and %d replacements trained, want 5 and 1 (a rank was started again)", len(first), len(rep))
			}
			went := wentOn.FindAllStringSubmatch(stdout, -1)
			if len(went) != 3 {
				return fmt.Errorf("%d survivors went on with the replacement, want 3", len(went))
			}
			for _, m := range went {
				if m[1] == rep[0][1] || !slices.Contains(first[:4], m[1]) {
					return fmt.Errorf("process %s went on but is not one of the four that joined first: a survivor was restarted", m[1])
				}
			}
			finals := final.FindAllStringSubmatch(stdout, -1)
			if len(finals) != 4 {
				return fmt.Errorf("%d final lines after every step in a world of 4, want 4", len(finals))
			}
			for _, f := range finals {
				if f[2] != finals[0][2] {
					return fmt.Errorf("process %s ended with model %s, process %s with %s", f[1], f[2], finals[0][1], finals[0][2])
				}
			}
			return nil
		},
	}
}

// torchRestarted is the same job without spindle.failure.replaceWorkers,
// its baseline: the survivors' gloo group fails, and every rank restarts
// with a new process that starts over (the job saves no checkpoint). Its
// recovery is the kill until the four new processes joined their world.
func torchRestarted() fault {
	final := regexp.MustCompile(`torchshrink final pid=\d+ rank=\d+ world=4 steps=400 params_sha256=([0-9a-f]+)`)
	return fault{name: "gang restarted: PyTorch DDP rank of 4 (no input)", want: 4, recovers: true,
		args:    torchReplace4(),
		victims: func(*exec.Cmd) []int { return pids(python, torchShrinkScript) },
		ready:   regexp.MustCompile(`(?s)(torchshrink joined .*){4}`),
		trained: regexp.MustCompile(`(?s)(torchshrink joined pid=\d+ rank=\d+ world=4.*){8}`),
		check: func(stdout string) error {
			finals := final.FindAllStringSubmatch(stdout, -1)
			if len(finals) != 4 {
				return fmt.Errorf("%d final lines after every step in a world of 4, want 4", len(finals))
			}
			for _, f := range finals {
				if f[1] != finals[0][1] {
					return fmt.Errorf("the last generation's four ranks ended with different models")
				}
			}
			return nil
		},
	}
}
