package dispatch

import (
	"context"
	"log/slog"
	"sync"

	"github.com/agentgate/agentgate/internal/service"
)

// JobHandler executes one job (service.Worker does).
type JobHandler interface {
	Handle(ctx context.Context, job service.Job) error
}

// InProcess dispatches jobs to a worker in a goroutine (the local stand-in
// for an async Lambda invoke). Wait blocks until dispatched jobs are done.
type InProcess struct {
	Worker JobHandler
	Logger *slog.Logger
	wg     sync.WaitGroup
}

var _ service.Dispatcher = (*InProcess)(nil)

// Dispatch starts the job and returns at once; a failure of the job is
// logged (the sweep recovers the run).
func (d *InProcess) Dispatch(ctx context.Context, job service.Job) error {
	if err := job.Validate(); err != nil {
		return err
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		if err := d.Worker.Handle(context.WithoutCancel(ctx), job); err != nil {
			log := d.Logger
			if log == nil {
				log = slog.Default()
			}
			log.Error("job failed", "run_id", job.RunID, "job", job.Kind, "err", err)
		}
	}()
	return nil
}

// Wait blocks until every dispatched job has finished.
func (d *InProcess) Wait() { d.wg.Wait() }
