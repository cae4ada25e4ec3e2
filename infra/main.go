package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/agentgate/agentgate/infra/stack"
)

func main() {
	defer jsii.Close()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "infra:", err)
		os.Exit(1)
	}
}

func run() error {
	app := awscdk.NewApp(nil)
	cfg, err := readConfig(contextReader(app))
	if err != nil {
		return err
	}
	if err := stack.CheckAssets(cfg.props.AssetDir); err != nil {
		return err
	}
	stack.NewAgentgateStack(app, cfg.stackName, &cfg.props)
	stack.CheckCompliance(app, true)
	asm := app.Synth(nil)
	if findings := stack.UnacceptedFindings(asm, cfg.stackName); len(findings) > 0 {
		lines := make([]string, len(findings))
		for i, f := range findings {
			lines[i] = f.String()
		}
		return fmt.Errorf("cdk-nag: %d findings neither fixed nor accepted (infra/stack/nag.go):\n  %s", len(findings), strings.Join(lines, "\n  "))
	}
	return nil
}

// contextReader returns the app's context value for a key, or "" when unset.
func contextReader(app awscdk.App) func(key string) string {
	return func(key string) string {
		v := app.Node().TryGetContext(jsii.String(key))
		if v == nil {
			return ""
		}
		return fmt.Sprint(v)
	}
}
