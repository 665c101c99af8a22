// Package secretfd hands a job's secrets (its secret, its TLS bundle) to
// an executor through an inherited pipe instead of its environment: a
// process's initial environment stays readable in /proc/PID/environ by
// every process of the same user, the training processes included, even
// after os.Unsetenv.
package secretfd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"github.com/spindle-ml/spindle/internal/envcontract"
)

// Env names the inherited file descriptor the secrets can be read from,
// once. It carries a number, not a secret.
const Env = "SPINDLE_SECRETS_FD"

// maxSize bounds the secrets so that writing them into the pipe before
// the child reads never blocks (a pipe holds 64 KiB on Linux).
const maxSize = 32 << 10

// secretNames are the variables of an executor's launch that are
// secrets: they go through the pipe, everything else in the environment.
var secretNames = map[string]bool{envcontract.JobSecret: true, envcontract.JobTLS: true}

// Split separates the job's secrets from the plain variables of env.
func Split(env map[string]string) (secrets, plain map[string]string) {
	secrets, plain = map[string]string{}, map[string]string{}
	for k, v := range env {
		if secretNames[k] {
			secrets[k] = v
		} else {
			plain[k] = v
		}
	}
	return secrets, plain
}

// pipe returns the read end of a pipe that holds secrets, whose write
// end is already closed.
func pipe(secrets map[string]string) (*os.File, error) {
	b, err := json.Marshal(secrets)
	if err != nil {
		return nil, err
	}
	if len(b) > maxSize {
		return nil, fmt.Errorf("hand secrets to an executor: %d bytes, more than %d", len(b), maxSize)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("hand secrets to an executor: %w", err)
	}
	_, err = w.Write(b)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("hand secrets to an executor: %w", err)
	}
	return r, nil
}

// Attach arranges for cmd's process to inherit secrets through a pipe,
// named by Env in cmd.Env (which must be set). The returned close
// releases the parent's end; call it once cmd has started (or failed to).
// Nothing is attached when secrets is empty.
func Attach(cmd *exec.Cmd, secrets map[string]string) (release func(), err error) {
	if len(secrets) == 0 {
		return func() {}, nil
	}
	r, err := pipe(secrets)
	if err != nil {
		return nil, err
	}
	fd := 3 + len(cmd.ExtraFiles)
	cmd.ExtraFiles = append(cmd.ExtraFiles, r)
	cmd.Env = append(cmd.Env, Env+"="+strconv.Itoa(fd))
	return func() { r.Close() }, nil
}

// Inheritable returns the descriptor of a pipe holding secrets that a
// process replacing this one (syscall.Exec) inherits, and the Env entry
// naming it.
func Inheritable(secrets map[string]string) (envEntry string, err error) {
	r, err := pipe(secrets)
	if err != nil {
		return "", err
	}
	fd := int(r.Fd())
	// Fd put the file in blocking mode; clearing close-on-exec keeps
	// the descriptor open across exec. r must not be closed or
	// collected: the descriptor is handed on.
	if _, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_SETFD, 0); e != 0 {
		r.Close()
		return "", fmt.Errorf("hand secrets on: %w", e)
	}
	keep = append(keep, r)
	return Env + "=" + strconv.Itoa(fd), nil
}

// keep holds the files whose descriptors Inheritable hands on, so that
// no finalizer closes them before the exec.
var keep []*os.File

// Take reads the secrets from the descriptor Env names, closes it and
// removes Env from the environment. With Env unset it returns nil.
func Take() (map[string]string, error) {
	v, ok := os.LookupEnv(Env)
	if !ok {
		return nil, nil
	}
	os.Unsetenv(Env)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return nil, fmt.Errorf("$%s=%q: not an inherited file descriptor", Env, v)
	}
	syscall.CloseOnExec(fd)
	f := os.NewFile(uintptr(fd), "secrets")
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSize+1))
	if err != nil {
		return nil, fmt.Errorf("read the job's secrets from descriptor %d ($%s): %w", fd, Env, err)
	}
	var secrets map[string]string
	if err := json.Unmarshal(b, &secrets); err != nil {
		return nil, fmt.Errorf("read the job's secrets from descriptor %d ($%s): %w", fd, Env, err)
	}
	if secrets == nil {
		return nil, errors.New("read the job's secrets: none")
	}
	return secrets, nil
}
