package hadooprpc

import (
	"errors"
	"fmt"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
)

// Java exception classes that Hadoop IPC itself raises. Protocols add their
// own (HDFS: java.io.FileNotFoundException and so on).
const (
	// ClassIOException is the catch-all for server failures.
	ClassIOException = "java.io.IOException"
	// ClassNoSuchMethod reports a method the protocol lacks.
	ClassNoSuchMethod = "org.apache.hadoop.ipc.RpcNoSuchMethodException"
	// ClassNoSuchProtocol reports a protocol the server does not serve.
	ClassNoSuchProtocol = "org.apache.hadoop.ipc.RpcNoSuchProtocolException"
	// ClassRPCServer reports a malformed request.
	ClassRPCServer = "org.apache.hadoop.ipc.RpcServerException"
	// ClassStandby is what a standby namenode answers; clients fail over.
	ClassStandby = "org.apache.hadoop.ipc.StandbyException"
	// ClassAccessControl reports an authentication or permission failure.
	ClassAccessControl = "org.apache.hadoop.security.AccessControlException"
)

// ErrorCode is the errorDetail of a failed call.
type ErrorCode = hadooppb.RpcResponseHeaderProto_RpcErrorCodeProto

// RemoteError is a failed call as it travels on the wire: a Java exception
// class name and a message. Handlers return it (directly or wrapped) to choose
// the class a client sees; Client.Call returns it for failed calls.
type RemoteError struct {
	// Method is the method that failed (set by Client).
	Method string
	// Class is the Java exception class name.
	Class string
	// Message is the exception message.
	Message string
	// Code is the RPC error code; zero means ERROR_APPLICATION.
	Code ErrorCode
	// Fatal errors close the connection.
	Fatal bool
}

// Error implements error.
func (e *RemoteError) Error() string {
	s := e.Class
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Method != "" {
		s = e.Method + ": " + s
	}
	return s
}

// Errorf returns a *RemoteError of class with a formatted message.
func Errorf(class, format string, args ...any) *RemoteError {
	return &RemoteError{Class: class, Message: fmt.Sprintf(format, args...)}
}

// ExceptionClass returns the Java exception class of err: the class of a
// *RemoteError in its chain, or ClassIOException.
func ExceptionClass(err error) string {
	var re *RemoteError
	if errors.As(err, &re) {
		return re.Class
	}
	return ClassIOException
}

// asRemote turns any handler error into a RemoteError.
func asRemote(err error) *RemoteError {
	var re *RemoteError
	if errors.As(err, &re) {
		out := *re
		if out.Message == "" || err.Error() != re.Error() {
			// Keep the context the handler wrapped around the remote error.
			out.Message = err.Error()
		}
		if out.Code == 0 {
			out.Code = hadooppb.RpcResponseHeaderProto_ERROR_APPLICATION
		}
		return &out
	}
	return &RemoteError{Class: ClassIOException, Message: err.Error(), Code: hadooppb.RpcResponseHeaderProto_ERROR_APPLICATION}
}
