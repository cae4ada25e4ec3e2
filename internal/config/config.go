package config

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agentgate/agentgate/internal/approval"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/dynamo"
	"github.com/agentgate/agentgate/internal/service"
	"github.com/agentgate/agentgate/internal/webhook"
)

// Config is the configuration of a function or the local server. The model
// variables (AGENTGATE_MODEL, the provider keys) are provider.LoadConfig's:
// only the functions that run a model read them, so purge links no provider.
// Every default is the constant of the package that applies it.
type Config struct {
	Table               string          // AGENTGATE_TABLE
	Bucket              string          // AGENTGATE_BUCKET
	KMSKeyID            string          // AGENTGATE_KMS_KEY_ID (optional)
	StartRunFunction    string          // AGENTGATE_STARTRUN_FUNCTION
	ResumeFunction      string          // AGENTGATE_RESUME_FUNCTION
	PublicBaseURL       string          // AGENTGATE_PUBLIC_BASE_URL
	MailFrom            string          // AGENTGATE_MAIL_FROM
	SESAPI              approval.SESAPI // AGENTGATE_SES_API: v2 or v1, default approval.DefaultSESAPI
	ApprovalTTL         time.Duration   // AGENTGATE_APPROVAL_TTL, default service.DefaultApprovalTTL
	Retention           time.Duration   // AGENTGATE_RETENTION, default runs.DefaultRetention
	DueShards           int             // AGENTGATE_DUE_SHARDS, default dynamo.DefaultDueShards
	DeliveryConcurrency int             // AGENTGATE_WEBHOOK_CONCURRENCY, default service.DefaultDeliveryConcurrency
	AllowedModels       []string        // AGENTGATE_ALLOWED_MODELS, comma-separated model ids runs may choose
	DirectoryFile       string          // AGENTGATE_DIRECTORY, path of the directory file (optional)
	PolicyFile          string          // AGENTGATE_POLICY, path of the policy file (optional)
	// QuorumChecks is AGENTGATE_QUORUM_CHECK: on or off (the default in
	// this release), whether a suspension schedules the sweep's quorum
	// checks (service.Worker.QuorumChecks).
	QuorumChecks bool
	// QuorumCheckEvery is AGENTGATE_QUORUM_CHECK_EVERY: how often a
	// waiting run's quorum is checked again (a Go duration from
	// service.MinQuorumCheckEvery to service.MaxQuorumCheckEvery, default
	// service.DefaultQuorumCheckEvery). The workers schedule a hold's first
	// check by it and the sweep the later ones and the confirmation of a
	// lost call: give every function the same.
	QuorumCheckEvery time.Duration
}

// Variable names.
const (
	EnvTable              = "AGENTGATE_TABLE"
	EnvBucket             = "AGENTGATE_BUCKET"
	EnvKMSKeyID           = "AGENTGATE_KMS_KEY_ID"
	EnvStartRunFunction   = "AGENTGATE_STARTRUN_FUNCTION"
	EnvResumeFunction     = "AGENTGATE_RESUME_FUNCTION"
	EnvPublicBaseURL      = "AGENTGATE_PUBLIC_BASE_URL"
	EnvMailFrom           = "AGENTGATE_MAIL_FROM"
	EnvSESAPI             = "AGENTGATE_SES_API"
	EnvApprovalTTL        = "AGENTGATE_APPROVAL_TTL"
	EnvRetention          = "AGENTGATE_RETENTION"
	EnvDueShards          = "AGENTGATE_DUE_SHARDS"
	EnvAllowedModels      = "AGENTGATE_ALLOWED_MODELS"
	EnvDirectory          = "AGENTGATE_DIRECTORY"
	EnvPolicy             = "AGENTGATE_POLICY"
	EnvQuorumCheck        = "AGENTGATE_QUORUM_CHECK"
	EnvQuorumCheckEvery   = "AGENTGATE_QUORUM_CHECK_EVERY"
	EnvWebhookConcurrency = webhook.EnvConcurrency // read here with the sweep's other settings
)

// Load reads the configuration with getenv (os.Getenv in main) and checks
// that every variable in required is set; the error names what is missing
// or malformed.
func Load(getenv func(string) string, required ...string) (Config, error) {
	c := Config{
		Table:            getenv(EnvTable),
		Bucket:           getenv(EnvBucket),
		KMSKeyID:         getenv(EnvKMSKeyID),
		StartRunFunction: getenv(EnvStartRunFunction),
		ResumeFunction:   getenv(EnvResumeFunction),
		PublicBaseURL:    strings.TrimRight(getenv(EnvPublicBaseURL), "/"),
		MailFrom:         getenv(EnvMailFrom),
		DirectoryFile:    strings.TrimSpace(getenv(EnvDirectory)),
		PolicyFile:       strings.TrimSpace(getenv(EnvPolicy)),
		ApprovalTTL:      service.DefaultApprovalTTL,
		Retention:        runs.DefaultRetention,
		DueShards:        dynamo.DefaultDueShards,
	}
	for _, m := range strings.Split(getenv(EnvAllowedModels), ",") {
		if m = strings.TrimSpace(m); m != "" {
			c.AllowedModels = append(c.AllowedModels, m)
		}
	}
	var missing []string
	for _, name := range required {
		if strings.TrimSpace(getenv(name)) == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return Config{}, fmt.Errorf("missing environment variable(s): %s", strings.Join(missing, ", "))
	}
	var err error
	if c.SESAPI, err = approval.ParseSESAPI(getenv(EnvSESAPI)); err != nil {
		return Config{}, fmt.Errorf("%s=%w", EnvSESAPI, err)
	}
	switch v := getenv(EnvQuorumCheck); strings.ToLower(strings.TrimSpace(v)) {
	case "", "off":
	case "on":
		c.QuorumChecks = true
	default:
		return Config{}, fmt.Errorf("%s=%q: want on or off (the default)", EnvQuorumCheck, v)
	}
	if c.QuorumCheckEvery, err = QuorumCheckEveryFrom(getenv); err != nil {
		return Config{}, err
	}
	if c.ApprovalTTL, err = duration(getenv, EnvApprovalTTL, c.ApprovalTTL, service.MinApprovalTTL, service.MaxApprovalTTL); err != nil {
		return Config{}, err
	}
	if c.Retention, err = duration(getenv, EnvRetention, c.Retention, time.Second, 10*365*24*time.Hour); err != nil {
		return Config{}, err
	}
	if s := getenv(EnvDueShards); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 64 {
			return Config{}, fmt.Errorf("%s=%q: want an integer from 1 to 64", EnvDueShards, s)
		}
		c.DueShards = n
	}
	if c.DeliveryConcurrency, err = DeliveryConcurrencyFrom(getenv); err != nil {
		return Config{}, err
	}
	if c.PublicBaseURL != "" {
		u, err := url.Parse(c.PublicBaseURL)
		switch {
		case err != nil:
			return Config{}, fmt.Errorf("%s: not a URL; want an absolute http(s) URL", EnvPublicBaseURL)
		case u.User != nil:
			// Links are mailed: a password in them would be sent to every
			// approver (and is not echoed here, which goes to the log).
			return Config{}, fmt.Errorf("%s=%q: want a URL without user or password", EnvPublicBaseURL, u.Redacted())
		case (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
			return Config{}, fmt.Errorf("%s=%q: want an absolute http(s) URL without query or fragment", EnvPublicBaseURL, c.PublicBaseURL)
		}
	}
	return c, nil
}

// RetentionFrom reads AGENTGATE_RETENTION alone (serve on the embedded
// store, which needs none of the rest): runs.DefaultRetention when unset.
func RetentionFrom(getenv func(string) string) (time.Duration, error) {
	return duration(getenv, EnvRetention, runs.DefaultRetention, time.Second, 10*365*24*time.Hour)
}

// QuorumCheckEveryFrom reads AGENTGATE_QUORUM_CHECK_EVERY alone (serve on
// the embedded store): service.DefaultQuorumCheckEvery when unset.
func QuorumCheckEveryFrom(getenv func(string) string) (time.Duration, error) {
	return duration(getenv, EnvQuorumCheckEvery, service.DefaultQuorumCheckEvery, service.MinQuorumCheckEvery, service.MaxQuorumCheckEvery)
}

// DeliveryConcurrencyFrom reads AGENTGATE_WEBHOOK_CONCURRENCY alone (serve
// on the embedded store): service.DefaultDeliveryConcurrency when unset.
func DeliveryConcurrencyFrom(getenv func(string) string) (int, error) {
	s := getenv(EnvWebhookConcurrency)
	if s == "" {
		return service.DefaultDeliveryConcurrency, nil
	}
	n, err := webhook.ParseConcurrency(s)
	if err != nil {
		return 0, fmt.Errorf("%s=%w", EnvWebhookConcurrency, err)
	}
	return n, nil
}

func duration(getenv func(string) string, name string, def, lo, hi time.Duration) (time.Duration, error) {
	s := getenv(name)
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < lo || d > hi {
		return 0, fmt.Errorf("%s=%q: want a Go duration from %s to %s", name, s, lo, hi)
	}
	return d, nil
}
