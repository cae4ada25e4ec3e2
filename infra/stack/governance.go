package stack

import (
	"fmt"
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"

	"github.com/agentgate/agentgate/internal/identity"
	"github.com/agentgate/agentgate/internal/policy"
)

// The directory and policy files (issue #14: who may approve what) travel
// with the deployment in Lambda layers, like the tool-sources file, each
// in its own layer and only to the functions that read it:
//   - the directory (AGENTGATE_DIRECTORY) to all three: startrun and resume
//     resolve initiators, approvers and groups; purge mails its reminders
//     to the persons who may still decide;
//   - the policy (AGENTGATE_POLICY) to startrun and resume only: they judge
//     calls and check that a run only tightens the policy; purge judges
//     nothing.
//
// Both are validated at synth exactly as the functions load them, so a CEL
// error or an approver group the directory lacks stops `cdk synth` naming
// the rule. Layers in the stack need no IAM statement.

// Where the layers put the files (layers unpack under /opt), next to the
// tool-sources file (mcptool.LayerPath).
const (
	DirectoryLayerPath = "/opt/agentgate/directory.json"
	PolicyLayerPath    = "/opt/agentgate/policy.json"
)

// The variables that name the files (internal/config: EnvDirectory,
// EnvPolicy; not imported, it links the application's adapters).
const (
	envDirectory = "AGENTGATE_DIRECTORY"
	envPolicy    = "AGENTGATE_POLICY"
)

// Prefixes of the staged layer folders under the temp dir.
const (
	directoryDirPrefix = "agentgate-directory-"
	policyDirPrefix    = "agentgate-policy-"
)

// validateGovernance reports a directory or policy file that the
// functions would refuse at start-up: the same steps as app.LoadGovernance
// (not imported: it links the whole application into the CDK app).
func validateGovernance(p AgentgateStackProps) error {
	var dir *identity.Directory
	if p.DirectoryFile != "" {
		d, err := identity.LoadDirectory(p.DirectoryFile)
		if err != nil {
			return err
		}
		dir = d
	}
	if p.PolicyFile != "" {
		if _, err := policy.Load(p.PolicyFile, policy.Options{Directory: dir}); err != nil {
			return err
		}
	}
	return nil
}

// PolicyConditions lists the rules of a policy file that have a `when`
// condition (CEL): a function needs cel-go to load that policy.
func PolicyConditions(path string) ([]string, error) {
	f, err := policy.LoadFile(path)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, r := range f.Rules {
		if r.When != "" {
			ids = append(ids, r.ID)
		}
	}
	return ids, nil
}

// addGovernance ships the directory file to the three functions and the
// policy file to the workers; it does nothing for a file not configured.
func addGovernance(p AgentgateStackProps, fns functions) {
	if p.DirectoryFile != "" {
		layer := newFileLayer(p, fns, "Directory", p.DirectoryFile, directoryDirPrefix, DirectoryLayerPath, "directory")
		for _, fn := range []awslambda.Function{fns.startrun, fns.resume, fns.purge} {
			fn.AddLayers(layer)
			fn.AddEnvironment(jsii.String(envDirectory), jsii.String(DirectoryLayerPath), nil)
		}
	}
	if p.PolicyFile != "" {
		layer := newFileLayer(p, fns, "Policy", p.PolicyFile, policyDirPrefix, PolicyLayerPath, "policy")
		for _, fn := range []awslambda.Function{fns.startrun, fns.resume} {
			fn.AddLayers(layer)
			fn.AddEnvironment(jsii.String(envPolicy), jsii.String(PolicyLayerPath), nil)
		}
	}
}

// newFileLayer is a layer holding one deployment file at target.
func newFileLayer(p AgentgateStackProps, fns functions, id, src, prefix, target, what string) awslambda.LayerVersion {
	raw, err := os.ReadFile(src) //nolint:gosec // a deployment file named by the operator
	if err != nil {
		panic(fmt.Sprintf("read the %s file: %v", what, err)) // Validate read it already
	}
	dir, err := stageLayerFile(prefix, target, raw)
	if err != nil {
		panic(fmt.Sprintf("stage the %s file: %v", what, err))
	}
	arch := awslambda.Architecture_ARM_64()
	if p.Architecture == "x86_64" {
		arch = awslambda.Architecture_X86_64()
	}
	return awslambda.NewLayerVersion(fns.startrun.Stack(), jsii.String(id), &awslambda.LayerVersionProps{
		Code:                    awslambda.Code_FromAsset(jsii.String(dir), nil),
		CompatibleArchitectures: &[]awslambda.Architecture{arch},
		Description:             jsii.String("agentgate " + what + " file (" + target + ")"),
		RemovalPolicy:           p.removalPolicy(),
	})
}
