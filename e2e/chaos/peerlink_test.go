package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"time"
)

// Network faults between the two training processes of the logistic
// regression job: each rank runs under e2e/linkfault, which reaches the
// other rank through a fault proxy and reads the faults to put on that
// link from a file of the run's directory. The collective timeout is 3 s:
// a partition longer than that must fail the ranks naming the rank cut
// off, and the restart policy then runs the job to its end; a delay or a
// loss must slow the job without failing it, a delay being reported as a
// slow link.

// collectiveTimeout is the peer-fault job's spindle.collective.timeout.
const collectiveTimeout = 3 * time.Second

// peerFault is a fault on the link between ranks 0 and 1 for dur: spec
// holds each rank's linkfault lines.
type peerFault struct {
	what string
	spec map[int]string
	dur  time.Duration
}

func (p *peerFault) String() string {
	return fmt.Sprintf("the link between ranks 0 and 1 (%s for %s)", p.what, p.dur)
}

// apply writes each rank's faults; clear lets every link pass again.
func (p *peerFault) apply(dir string) {
	for r, spec := range p.spec {
		os.WriteFile(filepath.Join(dir, "linkfault", fmt.Sprintf("rank-%d", r)), []byte(spec), 0o644)
	}
}

func (p *peerFault) clear(dir string) {
	for r := range p.spec {
		os.WriteFile(filepath.Join(dir, "linkfault", fmt.Sprintf("rank-%d", r)), nil, 0o644)
	}
}

// namedPeer is a rank's failure naming the peer it lost, in the first
// restart's reason.
var namedPeer = regexp.MustCompile(`peer rank [01] \(`)

func peerFaults() []fault {
	job := func(dir, data string) []string {
		os.MkdirAll(filepath.Join(dir, "linkfault"), 0o755)
		return []string{"submit", "--master", "local[2]", "--conf", "spindle.log.level=warn",
			"--input", data + "/*.parquet", "--label-column", "label", "--feed", "tensor", "--batch-rows", "256",
			"--epochs", "12", "--checkpoint-dir", filepath.Join(dir, "ckpt"),
			"--conf", "spindle.failure.policy=restart", "--conf", "spindle.failure.maxRestarts=2",
			"--conf", "spindle.collective.timeout=" + collectiveTimeout.String(),
			"--env", "SPINDLE_LINKFAULT_DIR=" + filepath.Join(dir, "linkfault"),
			"--", linkfaultBin, logregBin, "--lr", "0.5"}
	}
	victims := func(*exec.Cmd) []int {
		if len(pids(logregBin)) < 2 {
			return nil
		}
		return pids(linkfaultBin)
	}
	partitioned := func(stderr string) error {
		if !namedPeer.MatchString(stderr) {
			return fmt.Errorf("no rank failure named the peer cut off (want %q in the restart's reason)", namedPeer)
		}
		return nil
	}
	slowNamed := regexp.MustCompile(`slow link.* peer=[01] `)
	slow := func(stderr string) error {
		if !slowNamed.MatchString(stderr) {
			return fmt.Errorf("no rank reported the slow link to its peer (want a %q log line)", slowNamed)
		}
		return nil
	}
	both := func(line0, line1 string) map[int]string { return map[int]string{0: line0, 1: line1} }
	return []fault{
		{name: "ranks' link delayed 300ms", args: job, want: 2, recovers: true, check: logregGood, checkStderr: slow, victims: victims,
			peers: &peerFault{"300 ms each way", both("1 delay 300ms", "0 delay 300ms"), 6 * time.Second}},
		{name: "ranks' link lossy 30%", args: job, want: 2, recovers: true, check: logregGood, victims: victims,
			peers: &peerFault{"30% of chunks held 200 ms", both("1 loss 0.3", "0 loss 0.3"), 6 * time.Second}},
		{name: "ranks' link cut one way", args: job, want: 2, recovers: true, check: logregGood, checkStderr: partitioned, victims: victims,
			peers: &peerFault{"rank 0's bytes to rank 1 lost", both("1 to blackhole", "0 from blackhole"), collectiveTimeout + 2*time.Second}},
		{name: "ranks' link partitioned", args: job, want: 2, recovers: true, check: logregGood, checkStderr: partitioned, victims: victims,
			peers: &peerFault{"both ways", both("1 both blackhole", "0 both blackhole"), collectiveTimeout + 2*time.Second}},
	}
}
