package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// KillMode is the moment a kill aims at.
type KillMode string

// The kill modes.
const (
	// KillTimer kills at a random instant.
	KillTimer KillMode = "timer"
	// KillAfterStart kills 0–5 ms after a 202 on POST /runs.
	KillAfterStart KillMode = "after_start"
	// KillAfterDecision kills 0–5 ms after a 202 on a decision.
	KillAfterDecision KillMode = "after_decision"
	// KillAfterResults kills 0–5 ms after a 202 on a submission of tool
	// results.
	KillAfterResults KillMode = "after_results"
	// KillDuringWrite kills while an approved write is in flight: the
	// recorder executed it and holds its answer until the server is dead.
	KillDuringWrite KillMode = "during_write"
	// KillAfterWrite kills 0–5 ms after the recorder executed a write.
	KillAfterWrite KillMode = "after_write"
	// KillStartup kills a restarting server 20–400 ms after it was started
	// (while it opens the store, lists tools, recovers runs).
	KillStartup KillMode = "startup"
)

var killModes = []KillMode{KillTimer, KillAfterStart, KillAfterDecision, KillDuringWrite, KillAfterWrite, KillAfterResults, KillStartup}

// Kill is one SIGKILL of the server.
type Kill struct {
	N    int       `json:"n"`
	Mode KillMode  `json:"mode"`
	At   time.Time `json:"at"`
	// Trigger is what fired a triggered kill (a run id or an idempotency
	// key); Fallback says the trigger did not come and a timer killed.
	Trigger  string `json:"trigger,omitempty"`
	Fallback bool   `json:"fallback,omitempty"`
	// Restart is how long the next process took to answer.
	Restart time.Duration `json:"restart_ns"`
}

// killer kills the server on a schedule, arming triggers for the moments a
// timer cannot hit.
type killer struct {
	srv *server
	rec *Recorder
	rng *rand.Rand
	log func(format string, args ...any)

	mu    sync.Mutex
	armed KillMode
	fire  chan string
	kills []Kill
	// failed is set when a restart failed for good.
	failed error
}

func newKiller(srv *server, rec *Recorder, rng *rand.Rand, log func(string, ...any)) *killer {
	k := &killer{srv: srv, rec: rec, rng: rng, log: log, fire: make(chan string, 1)}
	rec.OnCall = func(e Execution) bool { return k.notify(KillDuringWrite, e.Key) }
	rec.OnReturn = func(e Execution) { k.notify(KillAfterWrite, e.Key) }
	return k
}

// notify tells the killer a moment of kind happened; it reports whether an
// armed kill fired on it.
func (k *killer) notify(kind KillMode, detail string) bool {
	k.mu.Lock()
	if k.armed != kind {
		k.mu.Unlock()
		return false
	}
	k.armed = ""
	k.mu.Unlock()
	select {
	case k.fire <- detail:
		return true
	default:
		return false
	}
}

func (k *killer) arm(m KillMode) {
	k.mu.Lock()
	k.armed = m
	k.mu.Unlock()
	select { // drop a stale trigger
	case <-k.fire:
	default:
	}
}

func (k *killer) disarm() {
	k.mu.Lock()
	k.armed = ""
	k.mu.Unlock()
}

// plan spreads n kills over d (stratified, jittered) and gives each a mode,
// every mode about as often; a startup kill follows a timer kill, so it
// takes two of the n.
func planKills(rng *rand.Rand, d time.Duration, n int) ([]time.Duration, []KillMode) {
	var modes []KillMode
	for len(modes) < n {
		m := killModes[len(modes)%len(killModes)]
		if m == KillStartup {
			if len(modes)+2 > n {
				m = KillTimer
			} else {
				modes = append(modes, KillTimer)
			}
		}
		modes = append(modes, m)
	}
	// Shuffle in pairs so a startup kill stays right after its timer kill.
	type slot struct{ ms []KillMode }
	var slots []slot
	for i := 0; i < len(modes); i++ {
		if i+1 < len(modes) && modes[i+1] == KillStartup {
			slots = append(slots, slot{modes[i : i+2]})
			i++
			continue
		}
		slots = append(slots, slot{modes[i : i+1]})
	}
	rng.Shuffle(len(slots), func(i, j int) { slots[i], slots[j] = slots[j], slots[i] })
	modes = modes[:0:0]
	var at []time.Duration
	for i, s := range slots {
		t := time.Duration((float64(i) + 0.1 + 0.8*rng.Float64()) / float64(len(slots)) * float64(d))
		for range s.ms {
			at = append(at, t)
		}
		modes = append(modes, s.ms...)
	}
	return at, modes
}

// run executes the schedule from start; it returns when it is done or ctx
// ends. Kills stop at ctx's end; the server is left running.
func (k *killer) run(ctx context.Context, start time.Time, at []time.Duration, modes []KillMode) {
	for i := 0; i < len(modes); i++ {
		m := modes[i]
		if m == KillStartup {
			// Kill the process the previous kill's restart just started.
			if !k.restartAndKill(ctx) {
				return
			}
			continue
		}
		wait := time.Until(start.Add(at[i]))
		if wait < 500*time.Millisecond {
			wait = 500 * time.Millisecond // let the last restart do some work
		}
		if !sleepCtx(ctx, wait) {
			return
		}
		kl := Kill{Mode: m}
		switch m {
		case KillTimer:
		default:
			k.arm(m)
			select {
			case kl.Trigger = <-k.fire:
				if m != KillDuringWrite {
					time.Sleep(time.Duration(k.rng.IntN(5001)) * time.Microsecond)
				}
			case <-time.After(5 * time.Second):
				k.disarm()
				kl.Fallback = true
			case <-ctx.Done():
				k.disarm()
				return
			}
		}
		k.killNow(kl)
		if m == KillDuringWrite {
			k.rec.Release()
		}
		if i+1 < len(modes) && modes[i+1] == KillStartup {
			continue // restartAndKill restarts
		}
		if !k.restart(ctx) {
			return
		}
	}
}

func (k *killer) killNow(kl Kill) {
	kl.At = time.Now()
	k.srv.kill()
	k.mu.Lock()
	kl.N = len(k.kills) + 1
	k.kills = append(k.kills, kl)
	k.mu.Unlock()
	k.log("kill %d: %s%s", kl.N, kl.Mode, map[bool]string{true: " (trigger timed out)"}[kl.Fallback])
}

// restartAndKill starts the server and kills it 20–400 ms later, then
// starts it again.
func (k *killer) restartAndKill(ctx context.Context) bool {
	if err := k.srv.start(); err != nil {
		k.fail(err)
		return false
	}
	if !sleepCtx(ctx, time.Duration(20+k.rng.IntN(381))*time.Millisecond) {
		return k.awaitReady(ctx, time.Now())
	}
	k.killNow(Kill{Mode: KillStartup})
	return k.restart(ctx)
}

// restart starts a new server process and waits until it answers.
func (k *killer) restart(ctx context.Context) bool {
	time.Sleep(time.Duration(k.rng.IntN(200)) * time.Millisecond)
	began := time.Now()
	if err := k.srv.start(); err != nil {
		k.fail(err)
		return false
	}
	return k.awaitReady(ctx, began)
}

func (k *killer) awaitReady(ctx context.Context, began time.Time) bool {
	for attempt := 1; ; attempt++ {
		err := k.srv.waitReady(context.WithoutCancel(ctx), 90*time.Second)
		if err == nil {
			break
		}
		if attempt == 3 {
			k.fail(fmt.Errorf("restart after kill %d: %w", len(k.Kills()), err))
			return false
		}
		k.log("restart failed (%v); starting again", err)
		k.srv.kill()
		if err := k.srv.start(); err != nil {
			k.fail(err)
			return false
		}
	}
	k.mu.Lock()
	if n := len(k.kills); n > 0 {
		k.kills[n-1].Restart = time.Since(began)
	}
	k.mu.Unlock()
	return true
}

func (k *killer) fail(err error) {
	k.mu.Lock()
	k.failed = err
	k.mu.Unlock()
	k.log("%v", err)
}

// Kills returns the kills so far.
func (k *killer) Kills() []Kill {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]Kill(nil), k.kills...)
}

func (k *killer) err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.failed
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
