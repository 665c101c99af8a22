package master

import (
	"encoding/json"
	"fmt"

	pb "github.com/spindle-ml/spindle/standalone/standalonepb"
)

// cmdType tags a Raft log entry. The first byte of every entry is its type,
// the rest is the command as JSON.
type cmdType uint8

// Commands. Values are stored in Raft logs: never renumber them.
const (
	cmdRegisterWorker cmdType = 1
	cmdWorkerLost     cmdType = 2
	cmdWorkerReport   cmdType = 3
	cmdRegisterApp    cmdType = 4
	cmdEndApp         cmdType = 5
	cmdPlace          cmdType = 6
	cmdUpdate         cmdType = 7
	cmdStopRequest    cmdType = 8
	cmdAppInput       cmdType = 9
)

func (t cmdType) String() string {
	switch t {
	case cmdRegisterWorker:
		return "register-worker"
	case cmdWorkerLost:
		return "worker-lost"
	case cmdWorkerReport:
		return "worker-report"
	case cmdRegisterApp:
		return "register-app"
	case cmdEndApp:
		return "end-app"
	case cmdPlace:
		return "place"
	case cmdUpdate:
		return "update"
	case cmdStopRequest:
		return "stop-request"
	case cmdAppInput:
		return "app-input"
	}
	return fmt.Sprintf("command-%d", uint8(t))
}

// report is an executor's state as its worker reports it.
type report struct {
	App      string `json:"app"`
	ID       string `json:"id"`
	Running  bool   `json:"running"`
	ExitCode int    `json:"exit_code,omitempty"`
	Message  string `json:"message,omitempty"`
}

// registerWorkerCmd records a worker (re-)registration.
type registerWorkerCmd struct {
	Worker  Worker   `json:"worker"`
	Reports []report `json:"reports,omitempty"`
	TimeMS  int64    `json:"time_ms"`
}

// workerLostCmd declares a worker lost and its executors with it.
type workerLostCmd struct {
	ID      string `json:"id"`
	Message string `json:"message"`
	TimeMS  int64  `json:"time_ms"`
}

// workerReportCmd records the executor states a worker reported.
type workerReportCmd struct {
	ID      string   `json:"id"`
	Reports []report `json:"reports"`
	TimeMS  int64    `json:"time_ms"`
}

// appInputCmd records where an application takes pushed input.
type appInputCmd struct {
	App   string `json:"app"`
	Input string `json:"input"`
}

// registerAppCmd starts an application.
type registerAppCmd struct {
	Name       string `json:"name"`
	DriverHost string `json:"driver_host,omitempty"`
	RequestID  string `json:"request_id,omitempty"`
	TimeMS     int64  `json:"time_ms"`
}

// endAppCmd ends an application; its executors are to be stopped. Retain
// is how many ended applications the state keeps.
type endAppCmd struct {
	App     string         `json:"app"`
	State   pb.AppState    `json:"state"`
	Final   pb.FinalStatus `json:"final,omitempty"`
	Message string         `json:"message"`
	Retain  int            `json:"retain"`
	TimeMS  int64          `json:"time_ms"`
}

// placeCmd reserves resources for a whole gang at once.
type placeCmd struct {
	App       string      `json:"app"`
	RequestID string      `json:"request_id"`
	Executors []*Executor `json:"executors"`
	TimeMS    int64       `json:"time_ms"`
}

// update is a new state for one executor.
type update struct {
	App      string           `json:"app"`
	ID       string           `json:"id"`
	State    pb.ExecutorState `json:"state"`
	ExitCode int              `json:"exit_code,omitempty"`
	Message  string           `json:"message,omitempty"`
}

// updateCmd moves executors to new states.
type updateCmd struct {
	Updates []update `json:"updates"`
	TimeMS  int64    `json:"time_ms"`
}

// stopRequestCmd marks executors of an application to be stopped; no ids
// means all of them.
type stopRequestCmd struct {
	App    string   `json:"app"`
	IDs    []string `json:"ids,omitempty"`
	Reason string   `json:"reason"`
	TimeMS int64    `json:"time_ms"`
}

// encode serialises a command for the Raft log.
func encode(t cmdType, cmd any) ([]byte, error) {
	b, err := json.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("encode %s command: %w", t, err)
	}
	return append([]byte{byte(t)}, b...), nil
}
