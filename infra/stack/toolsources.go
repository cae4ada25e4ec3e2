package stack

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"

	"github.com/agentgate/agentgate/internal/mcptool"
)

// The tool-sources file (issue #12: remote MCP servers behind the approval
// gate) travels with the deployment in a Lambda layer, so the number of
// servers is not capped by Lambda's 4 KB environment: the startrun and
// resume functions get only its path (AGENTGATE_TOOL_SOURCES) and may read
// exactly the Secrets Manager secrets the file names. Purge runs no tools.

// sidReadToolSecrets is the statement letting the workers read the header
// secrets of the tool-sources file.
const sidReadToolSecrets = "ReadToolSourceSecrets"

// toolSourcesDirPrefix prefixes the staged layer folder under the temp dir.
const toolSourcesDirPrefix = "agentgate-tool-sources-"

// readToolSources parses the tool-sources file as the functions will
// (header values from Secrets Manager only) and returns its bytes and the
// secret ARNs it names.
func readToolSources(path string) ([]byte, []string, error) {
	f, err := mcptool.ReadFile(path, mcptool.ParseOptions{})
	if err != nil {
		return nil, nil, err
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("tool sources: %w", err)
	}
	return raw, f.SecretARNs(), nil
}

// stageLayerFile writes raw where a layer puts it (target, an absolute path
// under /opt), in a folder under the temp dir named by prefix and the
// content's hash (so the asset, and the layer version, change only with
// the file).
func stageLayerFile(prefix, target string, raw []byte) (string, error) {
	rel, err := filepath.Rel("/opt", target)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(raw)
	dir := filepath.Join(os.TempDir(), prefix+hex.EncodeToString(sum[:8]))
	path := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		return "", err
	}
	return dir, nil
}

// addToolSources ships the file to the workers and lets them read its
// secrets; it does nothing when no file is configured.
func addToolSources(p AgentgateStackProps, fns functions) {
	if p.ToolSourcesFile == "" {
		return
	}
	raw, arns, err := readToolSources(p.ToolSourcesFile)
	if err != nil {
		panic(err.Error()) // Validate reported it already
	}
	dir, err := stageLayerFile(toolSourcesDirPrefix, mcptool.LayerPath, raw)
	if err != nil {
		panic(fmt.Sprintf("stage the tool-sources file: %v", err))
	}
	arch := awslambda.Architecture_ARM_64()
	if p.Architecture == "x86_64" {
		arch = awslambda.Architecture_X86_64()
	}
	layer := awslambda.NewLayerVersion(fns.startrun.Stack(), jsii.String("ToolSources"), &awslambda.LayerVersionProps{
		Code:                    awslambda.Code_FromAsset(jsii.String(dir), nil),
		CompatibleArchitectures: &[]awslambda.Architecture{arch},
		Description:             jsii.String("agentgate tool-sources file (" + mcptool.LayerPath + ")"),
		RemovalPolicy:           p.removalPolicy(),
	})
	var resources []*string
	for _, a := range arns {
		resources = append(resources, jsii.String(a))
	}
	for _, fn := range []awslambda.Function{fns.startrun, fns.resume} {
		fn.AddLayers(layer)
		fn.AddEnvironment(jsii.String(mcptool.EnvFile), jsii.String(mcptool.LayerPath), nil)
		if len(resources) > 0 {
			fn.AddToRolePolicy(allow(sidReadToolSecrets, []string{"secretsmanager:GetSecretValue"}, resources, nil))
		}
	}
}

// validateToolSources reports an unreadable or invalid tool-sources file.
func validateToolSources(path string) error {
	if path == "" {
		return nil
	}
	_, _, err := readToolSources(path)
	return err
}
