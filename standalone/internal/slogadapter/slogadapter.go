package slogadapter

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// LevelTrace is the slog level hclog's Trace maps to.
const LevelTrace = slog.LevelDebug - 4

// Logger is an hclog.Logger that writes to a slog.Logger.
type Logger struct {
	l       *slog.Logger
	name    string
	implied []any
}

var _ hclog.Logger = (*Logger)(nil)

// New returns an hclog.Logger named name that writes to l.
func New(l *slog.Logger, name string) *Logger {
	return &Logger{l: l, name: name}
}

func toSlog(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace:
		return LevelTrace
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	}
	return slog.LevelInfo
}

// Log emits msg at level with key/value pairs.
func (a *Logger) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off {
		return
	}
	lvl := toSlog(level)
	ctx := context.Background()
	if !a.l.Enabled(ctx, lvl) {
		return
	}
	args = expand(args)
	if a.name != "" {
		args = append([]any{"logger", a.name}, args...)
	}
	a.l.Log(ctx, lvl, msg, args...)
}

// expand formats hclog.Fmt values, which slog would print as a raw slice.
func expand(args []any) []any {
	var out []any
	for i, v := range args {
		f, ok := v.(hclog.Format)
		if !ok || len(f) == 0 {
			continue
		}
		if out == nil {
			out = append([]any(nil), args...)
		}
		if format, ok := f[0].(string); ok {
			out[i] = fmt.Sprintf(format, f[1:]...)
		} else {
			out[i] = fmt.Sprint(f...)
		}
	}
	if out == nil {
		return args
	}
	return out
}

// Trace emits at trace level.
func (a *Logger) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }

// Debug emits at debug level.
func (a *Logger) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }

// Info emits at info level.
func (a *Logger) Info(msg string, args ...any) { a.Log(hclog.Info, msg, args...) }

// Warn emits at warn level.
func (a *Logger) Warn(msg string, args ...any) { a.Log(hclog.Warn, msg, args...) }

// Error emits at error level.
func (a *Logger) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }

func (a *Logger) enabled(l hclog.Level) bool {
	return a.l.Enabled(context.Background(), toSlog(l))
}

// IsTrace says whether trace messages are emitted.
func (a *Logger) IsTrace() bool { return a.enabled(hclog.Trace) }

// IsDebug says whether debug messages are emitted.
func (a *Logger) IsDebug() bool { return a.enabled(hclog.Debug) }

// IsInfo says whether info messages are emitted.
func (a *Logger) IsInfo() bool { return a.enabled(hclog.Info) }

// IsWarn says whether warnings are emitted.
func (a *Logger) IsWarn() bool { return a.enabled(hclog.Warn) }

// IsError says whether errors are emitted.
func (a *Logger) IsError() bool { return a.enabled(hclog.Error) }

// ImpliedArgs returns the key/value pairs added by With.
func (a *Logger) ImpliedArgs() []any { return a.implied }

// With returns a logger that adds args to every message.
func (a *Logger) With(args ...any) hclog.Logger {
	implied := append(append([]any(nil), a.implied...), args...)
	return &Logger{l: a.l.With(args...), name: a.name, implied: implied}
}

// Name returns the logger's name.
func (a *Logger) Name() string { return a.name }

// Named returns a logger whose name has name appended.
func (a *Logger) Named(name string) hclog.Logger {
	n := name
	if a.name != "" {
		n = a.name + "." + name
	}
	return &Logger{l: a.l, name: n, implied: a.implied}
}

// ResetNamed returns a logger named name.
func (a *Logger) ResetNamed(name string) hclog.Logger {
	return &Logger{l: a.l, name: name, implied: a.implied}
}

// SetLevel does nothing: the slog handler decides the level.
func (a *Logger) SetLevel(hclog.Level) {}

// GetLevel returns the most verbose level the slog handler emits.
func (a *Logger) GetLevel() hclog.Level {
	for _, l := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn, hclog.Error} {
		if a.enabled(l) {
			return l
		}
	}
	return hclog.Off
}

// StandardLogger returns a standard library logger writing at info level.
func (a *Logger) StandardLogger(*hclog.StandardLoggerOptions) *log.Logger {
	return slog.NewLogLogger(a.l.Handler(), slog.LevelInfo)
}

// StandardWriter returns a writer whose lines become info messages.
func (a *Logger) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	return a.StandardLogger(opts).Writer()
}
