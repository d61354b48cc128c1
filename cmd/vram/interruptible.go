package main

import (
	"context"
	"fmt"
)

// untilInterrupted runs work and returns what it returns, unless ctx is
// cancelled first (Ctrl-C): then it returns at once an error wrapping the
// context's cause ("interrupted while analyzing run.pickle"), and the work
// is left to end with the process. Reading a large snapshot and the
// replays of analyze and replay look at no context, and the first Ctrl-C
// only cancels it, so that without this they could not be stopped but by
// killing them. The work must not write files that a stop would leave
// half written: callers write their output after it returns.
func untilInterrupted[T any](ctx context.Context, what string, work func() (T, error)) (T, error) {
	var zero T
	if ctx == nil || ctx.Done() == nil {
		return work()
	}
	if ctx.Err() != nil {
		return zero, fmt.Errorf("%w while %s", context.Cause(ctx), what)
	}
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := work()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		return zero, fmt.Errorf("%w while %s", context.Cause(ctx), what)
	}
}
