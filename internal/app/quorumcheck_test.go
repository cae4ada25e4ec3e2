package app_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/agentgate/agentgate/internal/app"
	"github.com/agentgate/agentgate/internal/config"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/service"
)

type noDispatch struct{}

func (noDispatch) Dispatch(context.Context, service.Job) error { return nil }

// TestQuorumChecksSetting: the local server's workers schedule quorum
// checks (one process, one release); on AWS they do only with
// AGENTGATE_QUORUM_CHECK=on, off by default in this release.
func TestQuorumChecksSetting(t *testing.T) {
	noModel := loop.ModelFunc(func(context.Context, loop.ModelRequest) (loop.ModelResponse, error) {
		return loop.ModelResponse{}, errors.New("no model in this test")
	})
	local, err := app.OpenLocal(app.LocalOptions{Dir: t.TempDir(), Model: noModel})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = local.Close() })
	if !local.Worker.QuorumChecks {
		t.Error("local server: QuorumChecks off, want on")
	}
	for value, want := range map[string]bool{"": false, "off": false, "on": true} {
		env := map[string]string{config.EnvTable: "t", config.EnvBucket: "b", config.EnvQuorumCheck: value}
		c, err := config.Load(func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		a, err := app.NewAWS(app.AWSOptions{Config: c, AWS: aws.Config{Region: "us-east-1"}, Model: noModel, Dispatch: noDispatch{}})
		if err != nil {
			t.Fatalf("%q: %v", value, err)
		}
		if a.Worker.QuorumChecks != want {
			t.Errorf("AGENTGATE_QUORUM_CHECK=%q: QuorumChecks %v, want %v", value, a.Worker.QuorumChecks, want)
		}
	}
}

// TestQuorumCheckIntervalReachesWorkerAndSweep: the quorum checks'
// interval (AGENTGATE_QUORUM_CHECK_EVERY on AWS, LocalOptions for the
// local server) is the worker's, which schedules a hold's first check, and
// the sweep's, which schedules the later ones and confirms a lost call:
// one interval, so that "two checks at least the interval apart" holds.
func TestQuorumCheckIntervalReachesWorkerAndSweep(t *testing.T) {
	noModel := loop.ModelFunc(func(context.Context, loop.ModelRequest) (loop.ModelResponse, error) {
		return loop.ModelResponse{}, errors.New("no model in this test")
	})
	local, err := app.OpenLocal(app.LocalOptions{Dir: t.TempDir(), Model: noModel, QuorumCheckEvery: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = local.Close() })
	if local.Worker.QuorumCheckEvery != 3*time.Second || local.Sweeper.QuorumCheckEvery != 3*time.Second {
		t.Errorf("local server: worker %s, sweep %s, want 3s both", local.Worker.QuorumCheckEvery, local.Sweeper.QuorumCheckEvery)
	}
	for value, want := range map[string]time.Duration{"": service.DefaultQuorumCheckEvery, "2m": 2 * time.Minute} {
		env := map[string]string{config.EnvTable: "t", config.EnvBucket: "b", config.EnvQuorumCheckEvery: value}
		c, err := config.Load(func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		a, err := app.NewAWS(app.AWSOptions{Config: c, AWS: aws.Config{Region: "us-east-1"}, Model: noModel, Dispatch: noDispatch{}})
		if err != nil {
			t.Fatalf("%q: %v", value, err)
		}
		if a.Worker.QuorumCheckEvery != want || a.Sweeper.QuorumCheckEvery != want {
			t.Errorf("AGENTGATE_QUORUM_CHECK_EVERY=%q: worker %s, sweep %s, want %s both", value, a.Worker.QuorumCheckEvery, a.Sweeper.QuorumCheckEvery, want)
		}
	}
}
