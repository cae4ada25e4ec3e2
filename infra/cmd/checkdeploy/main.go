package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/apigateway"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/wafv2"
)

func main() {
	stackName := flag.String("stack", "Agentgate", "name of the deployed stack")
	purgeRate := flag.String("purge-schedule", "rate(1 minute)", "expected schedule expression of the purge rule")
	stage := flag.String("stage", "v1", "expected API stage name")
	arch := flag.String("architecture", "arm64", "expected architecture of the functions (arm64, or x86_64 for an x86 emulator)")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := newChecker(ctx, *stackName)
	if err != nil {
		fmt.Fprintln(os.Stderr, "checkdeploy:", err)
		os.Exit(1)
	}
	c.expectStage, c.expectPurgeRate, c.expectArch = *stage, *purgeRate, *arch
	fmt.Printf("checkdeploy: stack %s on %s (%s)\n", *stackName, c.endpointLabel(), c.emulator)
	c.checkNotHeld()
	c.checkTable(ctx)
	c.checkBucket(ctx)
	c.checkFunctions(ctx)
	c.checkAsync(ctx)
	c.checkAPI(ctx)
	c.checkRule(ctx)
	c.report()
	if c.failed > 0 {
		os.Exit(1)
	}
}

// checker holds the clients, the stack's outputs and resources, and the tally.
type checker struct {
	emulator string // "moto", "localstack" or "aws"
	endpoint string

	cfn *cloudformation.Client
	ddb *dynamodb.Client
	s3  *s3.Client
	lam *lambda.Client
	apg *apigateway.Client
	evb *eventbridge.Client
	sqs *sqs.Client
	cw  *cloudwatch.Client
	waf *wafv2.Client

	region string
	// notHeld counts the template's resources by type that the emulator's
	// CloudFormation did not create.
	notHeld map[string]int

	outputs   map[string]string
	physical  map[string][]resource // by resource type
	template  *template
	passed    int
	failed    int
	lines     []string
	stackName string

	expectStage, expectPurgeRate string
	// expectArch is the functions' architecture (-architecture): arm64,
	// what the stack ships, or x86_64, which scripts/infra-local.sh deploys
	// onto LocalStack on an x86 Docker host.
	expectArch string
}

type resource struct{ logical, physical string }

func newChecker(ctx context.Context, stackName string) (*checker, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("load AWS configuration: %w", err)
	}
	c := &checker{
		endpoint:  os.Getenv("AWS_ENDPOINT_URL"),
		stackName: stackName,
		cfn:       cloudformation.NewFromConfig(cfg),
		ddb:       dynamodb.NewFromConfig(cfg),
		s3:        s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = os.Getenv("AWS_ENDPOINT_URL") != "" }),
		lam:       lambda.NewFromConfig(cfg),
		apg:       apigateway.NewFromConfig(cfg),
		evb:       eventbridge.NewFromConfig(cfg),
		sqs:       sqs.NewFromConfig(cfg),
		cw:        cloudwatch.NewFromConfig(cfg),
		waf:       wafv2.NewFromConfig(cfg),
		region:    cfg.Region,
		outputs:   map[string]string{},
		physical:  map[string][]resource{},
	}
	c.emulator = detectEmulator(ctx, c.endpoint)

	stacks, err := c.cfn.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: &stackName})
	if err != nil {
		return nil, fmt.Errorf("describe stack %s: %w", stackName, err)
	}
	if len(stacks.Stacks) != 1 {
		return nil, fmt.Errorf("describe stack %s: %d stacks", stackName, len(stacks.Stacks))
	}
	st := stacks.Stacks[0]
	if s := string(st.StackStatus); s != "CREATE_COMPLETE" && s != "UPDATE_COMPLETE" {
		return nil, fmt.Errorf("stack %s is %s", stackName, s)
	}
	for _, o := range st.Outputs {
		c.outputs[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
	}
	res, err := c.cfn.DescribeStackResources(ctx, &cloudformation.DescribeStackResourcesInput{StackName: &stackName})
	if err != nil {
		return nil, fmt.Errorf("stack resources: %w", err)
	}
	for _, r := range res.StackResources {
		typ := aws.ToString(r.ResourceType)
		c.physical[typ] = append(c.physical[typ], resource{aws.ToString(r.LogicalResourceId), aws.ToString(r.PhysicalResourceId)})
	}
	tpl, err := c.cfn.GetTemplate(ctx, &cloudformation.GetTemplateInput{StackName: &stackName})
	if err != nil {
		return nil, fmt.Errorf("deployed template: %w", err)
	}
	if c.template, err = parseTemplate(aws.ToString(tpl.TemplateBody)); err != nil {
		return nil, err
	}
	return c, nil
}

// detectEmulator tells moto from LocalStack by their own health endpoints.
func detectEmulator(ctx context.Context, endpoint string) string {
	if endpoint == "" {
		return "aws"
	}
	client := &http.Client{Timeout: 3 * time.Second}
	for _, probe := range []struct{ path, name string }{
		{"/_localstack/health", "localstack"}, // first: LocalStack embeds moto
		{"/moto-api/", "moto"},
	} {
		path, name := probe.path, probe.name
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(endpoint, "/")+path, nil)
		if err != nil {
			continue
		}
		resp, err := client.Do(req)
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return name
		}
	}
	return "unknown emulator"
}

func (c *checker) endpointLabel() string {
	if c.endpoint == "" {
		return "AWS"
	}
	return c.endpoint
}

// output returns a stack output or records a failure.
func (c *checker) output(key string) string {
	v, ok := c.outputs[key]
	if !ok || v == "" {
		c.fail("stack", "output "+key, "missing")
	}
	return v
}

func (c *checker) pass(area, what, source string) {
	c.passed++
	c.lines = append(c.lines, fmt.Sprintf("ok    %-9s %s  [%s]", area, what, source))
}

func (c *checker) fail(area, what, detail string) {
	c.failed++
	c.lines = append(c.lines, fmt.Sprintf("FAIL  %-9s %s: %s", area, what, detail))
}

// expect compares a live value with want. When they differ, the emulator is
// moto and gap is given, gap (a check of the deployed template) decides, and
// the line says so.
func (c *checker) expect(area, what, got, want string, gap func() (string, bool)) {
	if got == want {
		c.pass(area, what+" = "+shown(want), "live")
		return
	}
	if gap != nil && c.emulator == "moto" {
		detail, ok := gap()
		if ok {
			c.pass(area, what+" = "+shown(want), "deployed template; moto does not apply it, live "+quote(got))
			return
		}
		c.fail(area, what, fmt.Sprintf("live %s, deployed template %s, want %s", quote(got), quote(detail), shown(want)))
		return
	}
	c.fail(area, what, fmt.Sprintf("got %s, want %s", quote(got), shown(want)))
}

// quote shows an empty value as "" and shortens SDK errors to their API
// error (the part a reader needs).
func quote(s string) string {
	if s == "" {
		return `""`
	}
	if i := strings.LastIndex(s, "api error "); strings.HasPrefix(s, "error: ") && i >= 0 {
		return "error: " + s[i+len("api error "):]
	}
	if i := strings.LastIndex(s, "StatusCode: 404"); strings.HasPrefix(s, "error: ") && i >= 0 {
		return "error: 404" + s[strings.LastIndex(s, ",")+1:]
	}
	return s
}

// shown is how an expected value appears in a line.
func shown(want string) string {
	if want == "" {
		return "none"
	}
	return want
}

func (c *checker) report() {
	for _, l := range c.lines {
		fmt.Println(l)
	}
	fmt.Printf("checkdeploy: %d passed, %d failed\n", c.passed, c.failed)
}
