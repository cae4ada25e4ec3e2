package app

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/agentgate/agentgate/internal/approval"
	"github.com/agentgate/agentgate/internal/awswire"
	"github.com/agentgate/agentgate/internal/dispatch"
	"github.com/agentgate/agentgate/internal/docstore"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/routes"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/embedded"
)

// Local is an App on the embedded default: bbolt for runs, state blobs and
// the documents' idempotency markers, a folder for documents, an outbox
// folder for mail, in-process dispatch.
type Local struct {
	*App
	Dispatcher *dispatch.InProcess
	Dir        string
	db         *embedded.DB
}

// Close releases the database.
func (l *Local) Close() error {
	if l.db == nil {
		return nil
	}
	return l.db.Close()
}

var _ docstore.MarkerStore = (*embedded.DB)(nil)

// LocalOptions configure OpenLocal.
type LocalOptions struct {
	// Dir holds agentgate.db (LocalStoreFile), content/ and outbox/.
	Dir string
	// Seed are documents (path -> text) written into content/ when the
	// embedded store does not exist yet (the first start on Dir), and only
	// then: on a later start a seeded document the store's runs deleted
	// stays deleted. Ignored with Rows and States.
	Seed  map[string]string
	Model loop.Model
	// ToolSources are MCP servers' tools (OpenToolSources; nil: none).
	ToolSources ToolSources
	// BaseURL is the local server's address, for approval links.
	BaseURL     string
	ApprovalTTL time.Duration
	Retention   time.Duration
	// MailOut receives the approval links the outbox prints.
	MailOut io.Writer
	// Webhooks configure webhook delivery (nil: none).
	Webhooks *Webhooks
	// Governance is the directory and policy (LoadGovernance; zero: neither).
	Governance Governance
	// SegmentBudget, when positive, ends a worker's segment after this
	// long: the run is checkpointed and continued by a new job.
	SegmentBudget time.Duration
	// QuorumCheckEvery is the quorum checks' interval (serve
	// --quorum-check-every; 0: service.DefaultQuorumCheckEvery).
	QuorumCheckEvery time.Duration
	// Rows and States, when both set, replace the embedded store (tests
	// run the local application on DynamoDB+S3 adapters this way); the
	// documents' idempotency markers are then files in content/.applied/.
	Rows   runs.RowStore
	States runs.StateStore
	Logger *slog.Logger
	Now    func() time.Time
}

// LocalStoreFile is the embedded store's file in LocalOptions.Dir.
const LocalStoreFile = "agentgate.db"

// OpenLocal builds the embedded-default App.
func OpenLocal(o LocalOptions) (*Local, error) {
	for _, sub := range []string{"content", "outbox"} {
		if err := os.MkdirAll(filepath.Join(o.Dir, sub), 0o700); err != nil {
			return nil, fmt.Errorf("create %s: %w", sub, err)
		}
	}
	opts := runs.Options{Now: o.Now, Retention: o.Retention, Logger: o.Logger, Outbound: awswire.Outbound()}
	var store *runs.Store
	var db *embedded.DB
	if o.Rows != nil && o.States != nil {
		store = runs.NewStore(o.Rows, o.States, opts)
	} else {
		path := filepath.Join(o.Dir, LocalStoreFile)
		if err := seedNewStore(path, filepath.Join(o.Dir, "content"), o.Seed); err != nil {
			return nil, err
		}
		var err error
		if store, db, err = embedded.OpenStore(path, opts); err != nil {
			return nil, fmt.Errorf("open embedded store: %w", err)
		}
	}
	closeDB := func() {
		if db != nil {
			db.Close()
		}
	}
	// On the embedded store the documents' idempotency markers are keys in
	// its database (one more write in a group commit, not a new file per
	// document write); on other row and state stores they stay files.
	var docOpts []docstore.DirOption
	if db != nil {
		docOpts = append(docOpts, docstore.WithMarkerStore(db))
	}
	docs, err := docstore.NewDirBackend(filepath.Join(o.Dir, "content"), docOpts...)
	if err != nil {
		closeDB()
		return nil, err
	}
	out := o.MailOut
	if out == nil {
		out = io.Discard
	}
	disp := &dispatch.InProcess{Logger: o.Logger}
	a, err := New(Deps{
		Store: store, Docs: docs, Model: o.Model, Dispatch: disp, ToolSources: o.ToolSources,
		Mailer:        approval.NewOutboxMailer(filepath.Join(o.Dir, "outbox"), "agentgate@localhost", out),
		PublicBaseURL: o.BaseURL, ApprovalTTL: o.ApprovalTTL, Owner: localOwner(),
		Routes: routes.All(), Webhooks: o.Webhooks, Logger: o.Logger, Now: o.Now, Governance: o.Governance,
		SegmentBudget: o.SegmentBudget, MaxWait: runs.MaxWait,
		// One process of one release on its own store: no release before
		// this one can read a run's quorum check time for a reminder's.
		QuorumChecks:     true,
		QuorumCheckEvery: o.QuorumCheckEvery,
	})
	if err != nil {
		closeDB()
		return nil, err
	}
	disp.Worker = a.Worker
	return &Local{App: a, Dispatcher: disp, Dir: o.Dir, db: db}, nil
}

// seedNewStore writes the seed documents into content when the store at
// path does not exist yet. Written before the store is created: a start
// that fails between the two seeds again next time, which is harmless, as
// no run can have deleted a document of a store that never existed. A
// document already in content is left as it is.
func seedNewStore(path, content string, seed map[string]string) error {
	if len(seed) == 0 {
		return nil
	}
	switch _, err := os.Stat(path); {
	case err == nil:
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("seed documents: %w", err)
	}
	for name, text := range seed {
		doc := filepath.Join(content, filepath.FromSlash(name))
		if _, err := os.Lstat(doc); err == nil {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(doc), 0o700); err != nil {
			return fmt.Errorf("seed documents: %w", err)
		}
		if err := os.WriteFile(doc, []byte(text), 0o600); err != nil {
			return fmt.Errorf("seed documents: %w", err)
		}
	}
	return nil
}

// localOwner names this process's workers ("local-<8 hex digits>/..." are
// their lease owners), so that its start-up pass tells the leases of a
// previous process's workers (all dead: the store's file admits one
// process) from its own.
func localOwner() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "local-" + hex.EncodeToString(b[:])
}
