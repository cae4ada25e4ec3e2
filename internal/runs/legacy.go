package runs

import (
	"context"
	"encoding/json"
	"time"
)

// legacyRows upgrades rows written before FourEyes was a typed field of
// Run: those rows carry it only inside the stored start request. This is
// the one place that reads it from there, and it fails closed: a request
// that cannot be decoded makes the run four-eyes. (Such rows show no
// purpose or metadata; that is cosmetic and ends with their retention.)
type legacyRows struct{ RowStore }

func (l legacyRows) GetRun(ctx context.Context, id string) (*Run, error) {
	r, err := l.RowStore.GetRun(ctx, id)
	if err == nil {
		upgradeLegacy(r)
	}
	return r, err
}

func (l legacyRows) Due(ctx context.Context, now time.Time, limit int, cursor string) ([]*Run, string, error) {
	rs, next, err := l.RowStore.Due(ctx, now, limit, cursor)
	for _, r := range rs {
		upgradeLegacy(r)
	}
	return rs, next, err
}

func upgradeLegacy(r *Run) {
	if r == nil || len(r.Request) == 0 || r.FourEyes {
		return
	}
	var old struct {
		FourEyes bool `json:"four_eyes"`
	}
	if err := json.Unmarshal(r.Request, &old); err != nil || old.FourEyes {
		r.FourEyes = true
	}
}
