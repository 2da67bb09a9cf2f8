package worker

import (
	"context"
)

// signals is one reading of the signals a worker obeys: a restart request
// and paused queues, set with Queue.Restart and Queue.Pause.
type signals struct {
	restart int64           // value of the restart signal, 0 if never sent
	paused  map[string]bool // queue name → paused
}

// readSignals reads the restart signal and the pause state of queues in
// one query.
func readSignals(ctx context.Context, e queueOps, queues []string) (signals, error) {
	restart, paused, err := e.Signals(ctx, queues)
	if err != nil {
		return signals{}, err
	}
	return signals{restart: restart, paused: paused}, nil
}
