package httpapi_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/approval"
	"github.com/agentgate/agentgate/internal/clocktest"
	"github.com/agentgate/agentgate/internal/docstore"
	"github.com/agentgate/agentgate/internal/httpapi"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/provider/scripted"
	"github.com/agentgate/agentgate/internal/routes"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/embedded"
	"github.com/agentgate/agentgate/internal/service"
)

const (
	alice = "arn:aws:iam::123456789012:user/alice"
	bob   = "arn:aws:iam::123456789012:user/bob"
	carol = "arn:aws:iam::123456789012:user/carol"
)

const script = `{"turns":[
 {"content":[{"type":"tool_use","id":"tu_read","name":"read_document","input":{"path":"pages/pricing.md"}},
             {"type":"tool_use","id":"tu_write","name":"write_document","input":{"path":"pages/pricing.md","text":"Team: 12 EUR\n"}}]},
 {"content":[{"type":"text","text":"updated"}]}
]}`

// fixture is an API over the embedded store with a real worker and a fake
// clock; dispatched jobs are queued and run when the test calls drain, and
// approval links are recorded instead of mailed.
type fixture struct {
	t      *testing.T
	api    *httpapi.API
	store  *runs.Store
	worker *service.Worker
	clock  *clocktest.Clock
	dir    string
	mu     sync.Mutex
	jobs   []service.Job
	mailed []service.Notification
}

// newFixture builds a fixture whose model plays script (the default: a
// read and a write in one turn, then a final answer).
func newFixture(t *testing.T) *fixture { return newScriptedFixture(t, script) }

func newScriptedFixture(t *testing.T, script string) *fixture {
	t.Helper()
	f := buildFixture(t, t.TempDir(), script, nil)
	f.t = t
	return f
}

// buildFixture builds a fixture in dir on tb, a test or a fuzz target
// (which builds one for all its inputs and sets f.t for each); wrap, when
// set, wraps the row store.
func buildFixture(tb testing.TB, dir, script string, wrap func(runs.RowStore) runs.RowStore) *fixture {
	tb.Helper()
	clock := clocktest.New(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	db, err := embedded.Open(filepath.Join(dir, "runs.db"))
	require.NoError(tb, err)
	tb.Cleanup(func() { db.Close() })
	var rows runs.RowStore = db
	if wrap != nil {
		rows = wrap(db)
	}
	store := runs.NewStore(rows, db, runs.Options{Now: clock.Now})
	docs, err := docstore.NewDirBackend(filepath.Join(dir, "content"))
	require.NoError(tb, err)
	require.NoError(tb, os.MkdirAll(filepath.Join(dir, "content", "pages"), 0o700))
	require.NoError(tb, os.WriteFile(filepath.Join(dir, "content", "pages", "pricing.md"), []byte("Team: 10 EUR\n"), 0o600))
	tools, err := loop.NewToolbox(docstore.Tools(docs)...)
	require.NoError(tb, err)
	model, err := scripted.Parse([]byte(script))
	require.NoError(tb, err)
	f := &fixture{store: store, dir: dir, clock: clock}
	f.worker = &service.Worker{
		Store:    store,
		Runner:   func(h loop.Hooks) *loop.Runner { return &loop.Runner{Model: model, Tools: tools, Hooks: h} },
		NewToken: approval.NewToken,
		Notifier: service.NotifierFunc(func(_ context.Context, n service.Notification) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.mailed = append(f.mailed, n)
			return nil
		}),
		Owner: "test",
		Now:   clock.Now,
	}
	f.api = &httpapi.API{Store: store, Tools: tools, Routes: routes.All(), Now: clock.Now,
		Dispatch: service.DispatchFunc(func(_ context.Context, j service.Job) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.jobs = append(f.jobs, j)
			return nil
		})}
	return f
}

// drain runs every queued job.
func (f *fixture) drain() {
	f.t.Helper()
	for {
		f.mu.Lock()
		if len(f.jobs) == 0 {
			f.mu.Unlock()
			return
		}
		j := f.jobs[0]
		f.jobs = f.jobs[1:]
		f.mu.Unlock()
		require.NoError(f.t, f.worker.Handle(context.Background(), j))
	}
}

func req(method, path, who, body string) events.APIGatewayProxyRequest {
	r := events.APIGatewayProxyRequest{HTTPMethod: method, Path: path, Body: body, Headers: map[string]string{}}
	if body != "" {
		r.Headers["Content-Type"] = "application/json"
	}
	if who != "" {
		r.RequestContext.Identity.UserArn = who
	}
	return r
}

// handle serves one request.
func (f *fixture) handle(r events.APIGatewayProxyRequest) events.APIGatewayProxyResponse {
	f.t.Helper()
	resp, err := f.api.Handle(context.Background(), r)
	require.NoError(f.t, err)
	return resp
}

func (f *fixture) call(r events.APIGatewayProxyRequest) (int, map[string]any) {
	f.t.Helper()
	resp := f.handle(r)
	var out map[string]any
	if strings.HasPrefix(resp.Headers["Content-Type"], "application/json") {
		require.NoError(f.t, json.Unmarshal([]byte(resp.Body), &out), resp.Body)
	}
	return resp.StatusCode, out
}

// waitingRun starts a run and drives it to WAITING_FOR_APPROVAL.
func (f *fixture) waitingRun() *runs.Run {
	f.t.Helper()
	status, out := f.call(req("POST", "/runs", alice, `{"prompt":"update pricing","approvers":["`+bob+`","ops@example.com"]}`))
	require.Equal(f.t, 202, status, out)
	f.drain()
	r, err := f.store.Get(context.Background(), out["id"].(string))
	require.NoError(f.t, err)
	require.Equal(f.t, runs.StatusWaiting, r.Status)
	return r
}

func (f *fixture) pricing() string {
	b, err := os.ReadFile(filepath.Join(f.dir, "content", "pages", "pricing.md"))
	require.NoError(f.t, err)
	return string(b)
}

func withHeader(r events.APIGatewayProxyRequest, k, v string) events.APIGatewayProxyRequest {
	r.Headers[k] = v
	return r
}

func withQuery(r events.APIGatewayProxyRequest, kv ...string) events.APIGatewayProxyRequest {
	r.QueryStringParameters = map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		r.QueryStringParameters[kv[i]] = kv[i+1]
	}
	return r
}

// links returns the approval links recorded for approver so far, oldest
// first, as request paths (/approvals/{token}).
func (f *fixture) links(approver string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, n := range f.mailed {
		if n.Approver == approver {
			out = append(out, "/approvals/"+n.RawToken)
		}
	}
	return out
}

// link returns the last approval link recorded for approver.
func (f *fixture) link(approver string) string {
	f.t.Helper()
	l := f.links(approver)
	require.NotEmpty(f.t, l, "no approval link for %s", approver)
	return l[len(l)-1]
}

// run reads a run from the store.
func (f *fixture) run(id string) *runs.Run {
	f.t.Helper()
	r, err := f.store.Get(context.Background(), id)
	require.NoError(f.t, err)
	return r
}
