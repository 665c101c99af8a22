package yarntest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spindle-ml/spindle/fsys"
	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"github.com/spindle-ml/spindle/yarn/am"
)

// processHandle is a container's running process group.
type processHandle struct {
	pid  int
	done chan struct{}
}

func (p *processHandle) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal stops the container's process group: SIGTERM, then SIGKILL after
// the grace period (at once when now). It does not take Cluster.mu.
func (ct *container) signal(now bool) {
	ct.pmu.Lock()
	p, grace, wg, cancel := ct.proc, ct.grace, ct.wg, ct.cancel
	ct.pmu.Unlock()
	if cancel != nil {
		cancel()
		return
	}
	if p == nil || p.exited() {
		return
	}
	if now {
		syscall.Kill(-p.pid, syscall.SIGKILL)
		return
	}
	syscall.Kill(-p.pid, syscall.SIGTERM)
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-p.done:
		case <-t.C:
			syscall.Kill(-p.pid, syscall.SIGKILL)
		}
	}()
}

// run localizes a container's resources, writes its credentials and
// launch script, runs its command, and records how it ended.
func (c *Cluster) run(ct *container, clc *pb.ContainerLaunchContextProto, amrm *pb.TokenProto) {
	if c.cfg.Launcher != nil {
		c.simulate(ct, clc, amrm)
		return
	}
	n, a := ct.node, ct.app
	appDir := filepath.Join(n.dir, "usercache", a.user, "appcache", a.idString())
	work := filepath.Join(appDir, ct.idStr)
	logs := filepath.Join(n.dir, "logs", a.idString(), ct.idStr)
	env := map[string]string{}
	for _, kv := range clc.GetEnvironment() {
		env[kv.GetKey()] = kv.GetValue()
	}
	c.mu.Lock()
	ct.workDir, ct.logDir, ct.execID = work, logs, env["SPINDLE_EXECUTOR_ID"]
	c.mu.Unlock()

	cmd, err := c.prepare(ct, clc, amrm, env, work, logs)
	if err != nil {
		c.mu.Lock()
		c.completeLocked(ct, am.ExitInvalid, fmt.Sprintf("[test YARN] container %s did not launch: %v", ct.idStr, err))
		c.mu.Unlock()
		return
	}
	c.mu.Lock()
	if ct.forced != nil || ct.completed || n.state == pb.NodeStateProto_NS_LOST || c.closed {
		code, diag := int32(am.ExitKilledByAM), "Container killed before it started"
		if ct.forced != nil {
			code, diag = ct.forced.code, ct.forced.diag
		}
		c.completeLocked(ct, code, diag)
		c.mu.Unlock()
		return
	}
	if err := cmd.Start(); err != nil {
		c.completeLocked(ct, am.ExitInvalid, fmt.Sprintf("[test YARN] start container %s: %v", ct.idStr, err))
		c.mu.Unlock()
		return
	}
	p := &processHandle{pid: cmd.Process.Pid, done: make(chan struct{})}
	ct.pmu.Lock()
	ct.proc, ct.grace, ct.wg = p, c.cfg.KillGrace, &c.wg
	ct.pmu.Unlock()
	c.mu.Unlock()
	c.log.Info("container started", "container", ct.idStr, "node", n.addr, "pid", p.pid, "am", ct.isAM)

	werr := cmd.Wait()
	close(p.done)
	code := exitCode(cmd.ProcessState, werr)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.endedLocked(ct, code, func() string {
		return fmt.Sprintf("Exception from container-launch.\nContainer id: %s\nExit code: %d\n[test YARN] Container exited with a non-zero exit code %d. Last 4096 bytes of stderr :\n%s",
			ct.idStr, code, code, tail(filepath.Join(logs, "stderr"), 4096))
	})
}

// endedLocked records how a container ended: with the status YARN forced
// on it, else with its own code and, when that is not 0, failed's
// diagnostics. Called with c.mu held.
func (c *Cluster) endedLocked(ct *container, code int32, failed func() string) {
	diag := ""
	switch {
	case ct.forced != nil:
		code, diag = ct.forced.code, ct.forced.diag
	case code != 0:
		diag = failed()
	}
	c.completeLocked(ct, code, diag)
}

// exitCode is the container's exit status as YARN reports it: the
// process's own, or 128 plus the signal that killed it.
func exitCode(st *os.ProcessState, err error) int32 {
	if st == nil {
		return am.ExitInvalid
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return int32(128 + int(ws.Signal()))
	}
	return int32(st.ExitCode())
}

func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > n {
		f.Seek(fi.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

var braceVar = regexp.MustCompile(`\{\{([A-Za-z_][A-Za-z0-9_]*)\}\}`)

// expand applies YARN's launch-context expansions: {{VAR}} is $VAR on the
// node, <CPS> the class-path separator, <LOG_DIR> the container's log
// directory.
func expand(s, logDir string) string {
	s = braceVar.ReplaceAllString(s, "$$$1")
	s = strings.ReplaceAll(s, "<CPS>", ":")
	return strings.ReplaceAll(s, "<LOG_DIR>", logDir)
}

// prepare builds a container's directories, resources, credentials and
// launch script, and returns the command that runs it.
func (c *Cluster) prepare(ct *container, clc *pb.ContainerLaunchContextProto, amrm *pb.TokenProto, userEnv map[string]string, work, logs string) (*exec.Cmd, error) {
	n, a := ct.node, ct.app
	for _, d := range []string{work, logs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	tokens := clc.GetTokens()
	if amrm != nil {
		creds := hadooprpc.NewCredentials()
		version := hadooprpc.CredentialsWritable
		if len(tokens) > 0 {
			var err error
			if creds, err = hadooprpc.ReadCredentials(bytes.NewReader(tokens)); err != nil {
				return nil, fmt.Errorf("the launch context's tokens: %w", err)
			}
			version = tokens[4]
		}
		creds.Tokens[amrm.GetService()] = hadooprpc.TokenFromProto(amrm)
		var err error
		if tokens, err = creds.Marshal(version); err != nil {
			return nil, err
		}
	}
	tokFile := filepath.Join(work, "container_tokens")
	if err := os.WriteFile(tokFile, tokens, 0o600); err != nil {
		return nil, err
	}
	// A Kerberized cluster's NodeManager reads the container's hdfs://
	// resources with the delegation tokens of its launch context.
	localTokens := ""
	if c.cfg.ClientSASL != nil && len(tokens) > 0 {
		localTokens = tokFile
	}
	ctx, cancel := context.WithTimeout(c.ctx, 2*time.Minute)
	defer cancel()
	for _, lr := range clc.GetLocalResources() {
		local, err := c.localize(ctx, n, a.user, localTokens, lr.GetValue())
		if err != nil {
			return nil, fmt.Errorf("localize %s: %w", lr.GetKey(), err)
		}
		if err := os.Symlink(local, filepath.Join(work, lr.GetKey())); err != nil {
			return nil, err
		}
	}

	yarnEnv := map[string]string{
		"CONTAINER_ID": ct.idStr, "NM_HOST": n.nodeID.GetHost(), "NM_PORT": strconv.Itoa(int(n.nodeID.GetPort())),
		"NM_HTTP_PORT": "0", "LOCAL_DIRS": filepath.Join(n.dir, "usercache", a.user, "appcache", a.idString()),
		"LOG_DIRS": logs, "USER": a.user, "LOGNAME": a.user, "PWD": work, hadooprpc.EnvTokenFile: tokFile,
	}
	if c.cfg.HadoopConfDir != "" {
		yarnEnv["HADOOP_CONF_DIR"] = c.cfg.HadoopConfDir
	}
	if ct.isAM {
		yarnEnv["APPLICATION_WEB_PROXY_BASE"] = "/proxy/" + a.idString()
		yarnEnv["APP_SUBMIT_TIME_ENV"] = strconv.FormatInt(a.start.UnixMilli(), 10)
		yarnEnv["MAX_APP_ATTEMPTS"] = strconv.Itoa(int(a.maxAttempts))
	}
	launch := map[string]string{}
	for k, v := range userEnv {
		launch[k] = expand(v, logs)
	}
	for k, v := range yarnEnv {
		launch[k] = v
	}
	command := expand(strings.Join(clc.GetCommand(), " "), logs)
	script := launchScript(launch, command)
	scriptPath := filepath.Join(work, "launch_container.sh")
	if err := os.WriteFile(scriptPath, []byte(script), 0o700); err != nil {
		return nil, err
	}
	out, err := os.Create(filepath.Join(logs, "prelaunch.out"))
	if err != nil {
		return nil, err
	}
	errf, err := os.Create(filepath.Join(logs, "prelaunch.err"))
	if err != nil {
		out.Close()
		return nil, err
	}
	cmd := exec.Command("/bin/bash", scriptPath)
	cmd.Dir = work
	cmd.Env = containerEnv(launch, c.cfg.DropEnv)
	cmd.Stdout, cmd.Stderr = out, errf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		<-ct.done
		out.Close()
		errf.Close()
	}()
	return cmd, nil
}

// containerEnv is the process environment: the NodeManager's own, without
// the gateway's Spindle and Hadoop settings and the variables of drop,
// then the launch context's.
func containerEnv(launch map[string]string, drop []string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "SPINDLE_") || strings.HasPrefix(k, "HADOOP_") || k == "KRB5CCNAME" || slices.Contains(drop, k) {
			continue
		}
		if _, ok := launch[k]; ok {
			continue
		}
		env = append(env, kv)
	}
	for k, v := range launch {
		env = append(env, k+"="+v)
	}
	return env
}

// launchScript is the container's launch_container.sh, as a NodeManager
// writes it: the launch context's environment exported, then its command.
func launchScript(env map[string]string, command string) string {
	var b strings.Builder
	b.WriteString("#!/bin/bash\n# Written by the Spindle test YARN, as a NodeManager writes its launch script.\nset -o pipefail -e\n")
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "export %s=%s\n", k, shellQuote(env[k]))
	}
	fmt.Fprintf(&b, "exec /bin/bash -c %s\n", shellQuote(command))
	return b.String()
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// localize copies a LocalResource into the node's file cache, once per
// source and timestamp, refusing one whose timestamp changed as YARN does.
// With tokenFile, it reads HDFS with that credentials file's delegation
// tokens.
func (c *Cluster) localize(ctx context.Context, n *nodeManager, user, tokenFile string, lr *pb.LocalResourceProto) (string, error) {
	u := lr.GetResource()
	var src string
	switch u.GetScheme() {
	case "hdfs":
		src = fmt.Sprintf("hdfs://%s:%d%s", u.GetHost(), u.GetPort(), u.GetFile())
	case "file", "":
		src = u.GetFile()
	default:
		return "", fmt.Errorf("resource scheme %q is not served by the test YARN (hdfs and file are)", u.GetScheme())
	}
	if lr.GetType() != pb.LocalResourceTypeProto_LR_FILE {
		return "", fmt.Errorf("resource %s is of type %v: the test YARN localizes files only", src, lr.GetType())
	}
	key := fmt.Sprintf("%s@%d", src, lr.GetTimestamp())
	n.cacheMu.Lock()
	defer n.cacheMu.Unlock()
	if p, ok := n.cache[key]; ok {
		return p, nil
	}
	r := fsys.NewResolver(fsys.Options{HadoopConfDir: c.cfg.HadoopConfDir, User: user, TokenFile: tokenFile, NoTokens: tokenFile == ""})
	defer r.Close()
	f, name, err := r.Resolve(ctx, src)
	if err != nil {
		return "", err
	}
	fi, err := f.Stat(ctx, name)
	if err != nil {
		return "", fmt.Errorf("stat %s: %w", src, err)
	}
	if got := fi.ModTime().UnixMilli(); got != lr.GetTimestamp() {
		//lint:ignore ST1005 a NodeManager's own words, which clients match
		return "", fmt.Errorf("Resource %s changed on src filesystem (expected %d, was %d", src, lr.GetTimestamp(), got)
	}
	dir := filepath.Join(n.dir, "filecache", strconv.Itoa(len(n.cache)+10))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	dst := filepath.Join(dir, filepath.Base(name))
	in, err := f.Open(ctx, name)
	if err != nil {
		return "", fmt.Errorf("open %s: %w", src, err)
	}
	defer in.Close()
	// Streamed to a file beside dst first (never executed), then copied
	// in the kernel to dst with no fork in flight (writeUnforked).
	staged := dst + ".download"
	if err := copyToFile(staged, 0o600, in); err != nil {
		return "", fmt.Errorf("copy %s: %w", src, err)
	}
	defer os.Remove(staged)
	if err := writeUnforked(dst, staged); err != nil {
		return "", fmt.Errorf("localize %s: %w", src, err)
	}
	// Localized files are read-only, and executable (YARN gives them
	// r-x).
	if err := os.Chmod(dst, 0o500); err != nil {
		return "", err
	}
	n.cache[key] = dst
	return dst, nil
}

// copyToFile writes r to a new file at path with mode perm.
func copyToFile(path string, perm os.FileMode, r io.Reader) error {
	out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, r); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// writeUnforked copies the file staged to dst, a file a container may
// execute, while no process is forked from this one. This process starts
// containers while it localizes others' files: a child forked while dst
// is open for writing holds that descriptor until it execs, and a
// container that execs dst meanwhile fails with "Text file busy"
// (ETXTBSY; seen under load). Holding syscall.ForkLock for reading keeps
// exec.Command from forking while the descriptor is open; the copy
// between two local files is the kernel's (copy_file_range), so the lock
// is held briefly.
func writeUnforked(dst, staged string) error {
	in, err := os.Open(staged)
	if err != nil {
		return err
	}
	defer in.Close()
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	return copyToFile(dst, 0o700, in)
}
