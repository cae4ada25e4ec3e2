package app

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/agentgate/agentgate/internal/approval"
	"github.com/agentgate/agentgate/internal/docstore"
	"github.com/agentgate/agentgate/internal/httpapi"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/routes"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/service"
)

// Deps are the adapters an App is built from.
type Deps struct {
	Store *runs.Store
	Docs  docstore.Backend
	Model loop.Model
	// ToolSources are the deployment's MCP servers' tools (nil: none).
	ToolSources ToolSources
	Dispatch    service.Dispatcher
	// Mailer sends approval links to e-mail approvers (nil: API only).
	Mailer approval.Mailer
	// PublicBaseURL is the base of approval links.
	PublicBaseURL string
	ApprovalTTL   time.Duration
	// AllowedModels are the model ids a run may choose.
	AllowedModels []string
	// Owner names this process in lease owners.
	Owner string
	// MaxWait bounds how long GET /runs/{id}?wait=S may hold a request
	// (0: the API answers at once; see httpapi.API.MaxWait).
	MaxWait time.Duration
	// SegmentBudget, when positive, ends a worker's segment after this
	// long (checkpoint and re-dispatch; see service.Worker).
	SegmentBudget time.Duration
	Routes        routes.Table
	// Webhooks configure webhook delivery (nil: none).
	Webhooks *Webhooks
	// Governance is the directory and policy (zero: neither).
	Governance Governance
	// QuorumChecks has suspensions schedule the sweep's quorum checks
	// against the directory (service.Worker.QuorumChecks): on for the
	// local server, AGENTGATE_QUORUM_CHECK on AWS.
	QuorumChecks bool
	// QuorumCheckEvery is the quorum checks' interval, the worker's (a
	// hold's first check) and the sweep's (the later checks and the
	// confirmation of a lost call) alike (0:
	// service.DefaultQuorumCheckEvery).
	QuorumCheckEvery time.Duration
	Logger           *slog.Logger
	Now              func() time.Time
}

// ToolSources are tools from outside the binary: the MCP servers of a
// tool-sources file (*mcptool.Catalog, from OpenToolSources). Their tools
// are offered besides the builtin ones; NoteAbsent tells the toolbox which
// configured tools are missing and why, so a run naming one is refused
// with the reason; and the App's toolbox follows them (Seek, Revision): a
// server that was down at start-up and a tool a server offers later join
// the toolbox for the runs that start afterwards.
type ToolSources interface {
	loop.ToolSource
}

// App is a wired agentgate.
type App struct {
	Store   *runs.Store
	Tools   *loop.Toolbox
	Worker  *service.Worker
	API     *httpapi.API
	Sweeper *service.Sweeper
}

// New wires an App.
func New(d Deps) (*App, error) {
	if d.Store == nil || d.Docs == nil || d.Model == nil || d.Dispatch == nil {
		return nil, fmt.Errorf("app: store, docs, model and dispatch are required")
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	defs := docstore.Tools(d.Docs)
	var (
		tools *loop.Toolbox
		err   error
	)
	if d.ToolSources != nil {
		tools, err = loop.NewToolboxWithSource(d.ToolSources, defs...)
	} else {
		tools, err = loop.NewToolbox(defs...)
	}
	if err != nil {
		return nil, fmt.Errorf("app: tools: %w", err)
	}
	if unused := d.Governance.Policy.UnusedRules(tools.Names()); len(unused) > 0 {
		// Client tools exist only in the runs that declare them, so a rule
		// written for one matches no tool here, and is not wrong for that.
		d.Logger.Warn("policy rules that match no tool of this process: a typo, a tool source that is absent, or rules meant for client tools, which exist only in the runs that declare them", "rules", unused)
	}
	a := &App{Store: d.Store, Tools: tools}
	a.Worker = &service.Worker{
		Store: d.Store,
		Runner: func(h loop.Hooks) *loop.Runner {
			return &loop.Runner{Model: d.Model, Tools: tools, Hooks: h, Now: d.Now}
		},
		NewToken:         approval.NewToken,
		Notifier:         service.MailNotifier(d.Mailer, d.PublicBaseURL, d.Governance.Directory),
		ApprovalTTL:      d.ApprovalTTL,
		Directory:        d.Governance.Directory,
		QuorumChecks:     d.QuorumChecks,
		QuorumCheckEvery: d.QuorumCheckEvery,
		Policy:           d.Governance.Policy,
		Owner:            d.Owner,
		Dispatch:         d.Dispatch,
		SegmentBudget:    d.SegmentBudget,
		Logger:           d.Logger,
		Now:              d.Now,
	}
	a.API = &httpapi.API{
		Store: d.Store, Tools: tools, Dispatch: d.Dispatch, Routes: d.Routes,
		AllowedModels: d.AllowedModels, Logger: d.Logger, Now: d.Now,
		Directory: d.Governance.Directory, Policy: d.Governance.Policy, MaxWait: d.MaxWait,
	}
	a.Sweeper = &service.Sweeper{Store: d.Store, Dispatch: d.Dispatch, Remind: a.Worker.Remind, FirstMail: a.Worker.RecoverFirstMail, RetryMail: a.Worker.RetryMail, Revise: a.Worker.ReviseDeciders,
		Directory: d.Governance.Directory, QuorumCheckEvery: d.QuorumCheckEvery, Logger: d.Logger, Now: d.Now, Owner: d.Owner}
	if err := a.wireWebhooks(d.Webhooks); err != nil {
		return nil, err
	}
	return a, nil
}
