// Command infra is the agentgate CDK app: it synthesizes the Agentgate stack
// (see package stack) into a cloud assembly.
//
//	CDK_OUTDIR=cdk.out go run .            # synth without the CDK CLI (make synth)
//	npx cdk deploy --parameters ...        # the CLI runs the same app (cdk.json)
//
// Settings are CDK context values (cdk.json, `-c key=value`, or the
// CDK_CONTEXT_JSON environment variable the CLI itself uses); see config.go.
//
// Every synth runs the cdk-nag packs (stack.CheckCompliance), writes their
// CSV reports into the assembly and fails on a finding infra/stack/nag.go
// neither fixes nor accepts.
package main
