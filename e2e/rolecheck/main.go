// Command rolecheck is a training process for the role tests: it checks
// what Spindle told it about its role against TF_CONFIG, and that the
// cluster addresses TF_CONFIG lists are right, as a TensorFlow job would
// use them:
//
//   - SPINDLE_ROLE and SPINDLE_ROLE_RANK name TF_CONFIG's task;
//     SPINDLE_ROLES gives every role's size, which TF_CONFIG's cluster
//     has; workers have a feed, the other roles none;
//   - every task listens on its own address in the cluster spec, and the
//     chief and the workers dial every other task and check that the
//     task answering is the one the spec names there;
//   - workers read their feed to the end.
//
// It prints one line, as in
//
//	rolecheck role=worker index=1 rank=2 rows=1000 dialed=3
//
// then exits 0, except the roles named by -block (parameter servers, by
// default), which serve until they are killed, as TensorFlow's do.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spindle-ml/spindle/feed/wire"
)

type tfConfig struct {
	Cluster map[string][]string `json:"cluster"`
	Task    struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
	} `json:"task"`
}

func main() {
	exitCode := flag.Int("exit", -1, "exit with this status right after the checks, whatever the role")
	block := flag.String("block", "ps", "comma-separated `ROLES` that serve until killed after the checks (TF2 parameter-server workers do too)")
	pidDir := flag.String("pid-dir", "", "write this process's pid to `DIR`/ROLE-INDEX.pid")
	flag.Parse()

	role, index := os.Getenv("SPINDLE_ROLE"), os.Getenv("SPINDLE_ROLE_RANK")
	if *pidDir != "" {
		p := filepath.Join(*pidDir, role+"-"+index+".pid")
		if err := os.WriteFile(p, []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			fatal(err)
		}
	}
	var tf tfConfig
	if err := json.Unmarshal([]byte(os.Getenv("TF_CONFIG")), &tf); err != nil {
		fatal(fmt.Errorf("TF_CONFIG %q: %v", os.Getenv("TF_CONFIG"), err))
	}
	if tf.Task.Type != role || strconv.Itoa(tf.Task.Index) != index {
		fatal(fmt.Errorf("SPINDLE_ROLE=%s SPINDLE_ROLE_RANK=%s but TF_CONFIG's task is %s %d", role, index, tf.Task.Type, tf.Task.Index))
	}
	checkSizes(tf)
	me := tf.Cluster[role][tf.Task.Index]
	host, port, err := net.SplitHostPort(me)
	if err != nil || host != os.Getenv("SPINDLE_HOST") {
		fatal(fmt.Errorf("my TF_CONFIG address %s is not on SPINDLE_HOST %s", me, os.Getenv("SPINDLE_HOST")))
	}
	feeds := role == "worker"
	if mode := os.Getenv("SPINDLE_FEED_MODE"); feeds == (mode == "none") || feeds != (os.Getenv("SPINDLE_FEED") != "") {
		fatal(fmt.Errorf("role %s has SPINDLE_FEED_MODE=%q SPINDLE_FEED=%q", role, mode, os.Getenv("SPINDLE_FEED")))
	}

	// Serve my address: answer every connection with who I am.
	lis, err := net.Listen("tcp", net.JoinHostPort("", port))
	if err != nil {
		fatal(fmt.Errorf("listen on my TF_CONFIG address %s: %v", me, err))
	}
	var dialedMe atomic.Int32
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			fmt.Fprintf(c, "%s %d\n", role, tf.Task.Index)
			// A dialer says whether it counts (the chief and workers do).
			if line, _ := bufio.NewReader(c).ReadString('\n'); strings.TrimSpace(line) == "dialer" {
				dialedMe.Add(1)
			}
			c.Close()
		}
	}()

	dialers := len(tf.Cluster["chief"]) + len(tf.Cluster["worker"])
	dialed := 0
	if role != "ps" {
		dialed = dialAll(tf, me)
	}
	var rows int64
	if feeds {
		rows = readFeed()
	}
	if *exitCode >= 0 {
		fmt.Printf("rolecheck role=%s index=%s exiting with %d\n", role, index, *exitCode)
		os.Exit(*exitCode)
	}
	// Stay up until every other dialer reached me, so none finds me gone.
	want := dialers
	if role != "ps" {
		want--
	}
	deadline := time.Now().Add(60 * time.Second)
	for int(dialedMe.Load()) < want {
		if time.Now().After(deadline) {
			fatal(fmt.Errorf("only %d of %d tasks dialed me in 60s", dialedMe.Load(), want))
		}
		time.Sleep(20 * time.Millisecond)
	}
	fmt.Printf("rolecheck role=%s index=%s rank=%s rows=%d dialed=%d\n", role, index, os.Getenv("SPINDLE_RANK"), rows, dialed)
	for _, r := range strings.Split(*block, ",") {
		if r == role {
			select {} // serve until stopped
		}
	}
}

// checkSizes compares SPINDLE_ROLES (role:n,...) with TF_CONFIG's cluster.
func checkSizes(tf tfConfig) {
	got := map[string]int{}
	for _, part := range strings.Split(os.Getenv("SPINDLE_ROLES"), ",") {
		r, n, _ := strings.Cut(part, ":")
		got[r], _ = strconv.Atoi(n)
	}
	var roles []string
	for r, addrs := range tf.Cluster {
		roles = append(roles, r)
		if got[r] != len(addrs) {
			fatal(fmt.Errorf("SPINDLE_ROLES=%s but TF_CONFIG has %d %s tasks", os.Getenv("SPINDLE_ROLES"), len(addrs), r))
		}
	}
	sort.Strings(roles)
	if len(got) != len(roles) {
		fatal(fmt.Errorf("SPINDLE_ROLES=%s but TF_CONFIG has roles %v", os.Getenv("SPINDLE_ROLES"), roles))
	}
	if n, _ := strconv.Atoi(os.Getenv("SPINDLE_ROLE_WORLD_SIZE")); n != got[os.Getenv("SPINDLE_ROLE")] {
		fatal(fmt.Errorf("SPINDLE_ROLE_WORLD_SIZE=%d, SPINDLE_ROLES=%s", n, os.Getenv("SPINDLE_ROLES")))
	}
}

// dialAll dials every other task of the cluster spec (retrying while it
// starts) and checks the task answering is the one the spec names there.
func dialAll(tf tfConfig, me string) int {
	n := 0
	for role, addrs := range tf.Cluster {
		for i, addr := range addrs {
			if addr == me {
				continue
			}
			deadline := time.Now().Add(60 * time.Second)
			for {
				c, err := net.DialTimeout("tcp", addr, time.Second)
				if err == nil {
					fmt.Fprintln(c, "dialer")
					line, err := bufio.NewReader(c).ReadString('\n')
					c.Close()
					if want := fmt.Sprintf("%s %d", role, i); err == nil && strings.TrimSpace(line) != want {
						fatal(fmt.Errorf("TF_CONFIG lists %s at %s, but %q answered there", want, addr, strings.TrimSpace(line)))
					} else if err == nil {
						break
					}
				}
				if time.Now().After(deadline) {
					fatal(fmt.Errorf("%s %d at %s did not answer in 60s: %v", role, i, addr, err))
				}
				time.Sleep(50 * time.Millisecond)
			}
			n++
		}
	}
	return n
}

// readFeed reads every epoch of a tensor feed and returns the rows.
func readFeed() int64 {
	ctx := context.Background()
	var total int64
	for {
		ep, err := wire.DialTensor(ctx, os.Getenv("SPINDLE_FEED"))
		if err != nil {
			fatal(err)
		}
		batches := 0
		for {
			b, err := ep.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				fatal(err)
			}
			batches++
			total += int64(b.Rows)
		}
		ep.Close()
		if batches == 0 {
			return total
		}
	}
}

func fatal(err error) {
	fmt.Fprintf(os.Stderr, "rolecheck: %v\n", err)
	os.Exit(1)
}
