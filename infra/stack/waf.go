package stack

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awswafv2"
	"github.com/aws/jsii-runtime-go"
)

// The web ACL on the API stage. The approval routes need no AWS credentials
// (the token in the path is the credential), so an unauthenticated flood
// reaches the resume function, which also serves the signed /runs routes
// and the resume worker: the cost is money and stolen concurrency, not
// guessed tokens (256 bits). Three layers bound it:
//
//	web ACL, rule ApprovalRatePerIP   at most ApprovalRateLimit requests per
//	                                  client IP per ApprovalRateWindow to a path
//	                                  containing /approvals/ (with or without
//	                                  the stage prefix: custom domains drop it)
//	web ACL, rule CommonRules         AWS managed common rule set; its body
//	                                  rules count instead of block (below)
//	method throttles                  ApprovalThrottleRateLimit/BurstLimit on
//	                                  each approval method, below the stage's
//
// The common rule set's body rules only count: run bodies are prompts,
// transcripts and edited tool arguments, arbitrary text in which code, HTML
// or URLs are normal, and regional WAF inspects only their first 8 KB
// (SizeRestrictions_BODY would block every body above it; the handlers
// enforce their own limits, 256 KB for POST /runs).
var countedCommonRules = []string{
	"SizeRestrictions_BODY",
	"CrossSiteScripting_BODY",
	"GenericLFI_BODY",
	"GenericRFI_BODY",
	"EC2MetaDataSSRF_BODY",
}

// approvalPathMarker is what the per-IP rate rule looks for in the URI path.
const approvalPathMarker = "/approvals/"

// wafLogRedactedHeaders are request headers WAF logs must not hold: the
// SigV4 signature, a caller's session token, and the Idempotency-Key of
// POST /runs (a caller's name for a start, which agentgate itself stores
// only hashed and never logs: a key may be an order number or another
// value the caller keeps private).
var wafLogRedactedHeaders = []string{"authorization", "x-amz-security-token", "idempotency-key"}

// webACL is the web ACL, its association with the stage and its logging.
type webACL struct {
	acl         awswafv2.CfnWebACL
	association awswafv2.CfnWebACLAssociation
	logs        awslogs.LogGroup
	logging     awswafv2.CfnLoggingConfiguration
}

func visibility(metric string) *awswafv2.CfnWebACL_VisibilityConfigProperty {
	return &awswafv2.CfnWebACL_VisibilityConfigProperty{
		MetricName:               jsii.String(metric),
		CloudWatchMetricsEnabled: jsii.Bool(true),
		SampledRequestsEnabled:   jsii.Bool(true),
	}
}

func newWebACL(st awscdk.Stack, p AgentgateStackProps, api restAPI) webACL {
	var overrides []any
	for _, name := range countedCommonRules {
		overrides = append(overrides, &awswafv2.CfnWebACL_RuleActionOverrideProperty{
			Name:        jsii.String(name),
			ActionToUse: &awswafv2.CfnWebACL_RuleActionProperty{Count: &awswafv2.CfnWebACL_CountActionProperty{}},
		})
	}
	metric := *st.StackName()
	acl := awswafv2.NewCfnWebACL(st, jsii.String("WebAcl"), &awswafv2.CfnWebACLProps{
		Description:      jsii.String("agentgate API: per-IP rate on the approval routes, AWS managed common rules"),
		Scope:            jsii.String("REGIONAL"),
		DefaultAction:    &awswafv2.CfnWebACL_DefaultActionProperty{Allow: &awswafv2.CfnWebACL_AllowActionProperty{}},
		VisibilityConfig: visibility(metric + "-webacl"),
		Rules: &[]any{
			&awswafv2.CfnWebACL_RuleProperty{
				Name:     jsii.String("ApprovalRatePerIP"),
				Priority: jsii.Number(0),
				Action:   &awswafv2.CfnWebACL_RuleActionProperty{Block: &awswafv2.CfnWebACL_BlockActionProperty{}},
				Statement: &awswafv2.CfnWebACL_StatementProperty{
					RateBasedStatement: &awswafv2.CfnWebACL_RateBasedStatementProperty{
						AggregateKeyType:    jsii.String("IP"),
						Limit:               jsii.Number(p.ApprovalRateLimit),
						EvaluationWindowSec: jsii.Number(ApprovalRateWindow.Seconds()),
						ScopeDownStatement: &awswafv2.CfnWebACL_StatementProperty{
							ByteMatchStatement: &awswafv2.CfnWebACL_ByteMatchStatementProperty{
								FieldToMatch:         &awswafv2.CfnWebACL_FieldToMatchProperty{UriPath: map[string]any{}},
								PositionalConstraint: jsii.String("CONTAINS"),
								SearchString:         jsii.String(approvalPathMarker),
								TextTransformations: &[]any{&awswafv2.CfnWebACL_TextTransformationProperty{
									Priority: jsii.Number(0), Type: jsii.String("NONE"),
								}},
							},
						},
					},
				},
				VisibilityConfig: visibility(metric + "-approval-rate"),
			},
			&awswafv2.CfnWebACL_RuleProperty{
				Name:           jsii.String("CommonRules"),
				Priority:       jsii.Number(1),
				OverrideAction: &awswafv2.CfnWebACL_OverrideActionProperty{None: map[string]any{}},
				Statement: &awswafv2.CfnWebACL_StatementProperty{
					ManagedRuleGroupStatement: &awswafv2.CfnWebACL_ManagedRuleGroupStatementProperty{
						VendorName:          jsii.String("AWS"),
						Name:                jsii.String("AWSManagedRulesCommonRuleSet"),
						RuleActionOverrides: &overrides,
					},
				},
				VisibilityConfig: visibility(metric + "-common-rules"),
			},
		},
	})

	stage := api.DeploymentStage()
	assoc := awswafv2.NewCfnWebACLAssociation(st, jsii.String("WebAclAssociation"), &awswafv2.CfnWebACLAssociationProps{
		ResourceArn: stage.StageArn(),
		WebAclArn:   acl.AttrArn(),
	})
	assoc.Node().AddDependency(stage)

	// WAF logs blocked requests only, with the URI path (approval tokens),
	// the request's AWS credentials and its idempotency key redacted. WAF requires the
	// aws-waf-logs- prefix and the ARN without the trailing ":*".
	name := "aws-waf-logs-" + *st.StackName()
	logs := awslogs.NewLogGroup(st, jsii.String("WafLogs"), &awslogs.LogGroupProps{
		LogGroupName:  jsii.String(name),
		Retention:     p.LogRetention,
		RemovalPolicy: p.removalPolicy(),
	})
	redacted := []any{&awswafv2.CfnLoggingConfiguration_FieldToMatchProperty{UriPath: map[string]any{}}}
	for _, h := range wafLogRedactedHeaders {
		redacted = append(redacted, &awswafv2.CfnLoggingConfiguration_FieldToMatchProperty{
			SingleHeader: map[string]any{"Name": h},
		})
	}
	logging := awswafv2.NewCfnLoggingConfiguration(st, jsii.String("WafLogging"), &awswafv2.CfnLoggingConfigurationProps{
		ResourceArn: acl.AttrArn(),
		LogDestinationConfigs: &[]any{st.FormatArn(&awscdk.ArnComponents{
			Service: jsii.String("logs"), Resource: jsii.String("log-group"), ResourceName: jsii.String(name),
			ArnFormat: awscdk.ArnFormat_COLON_RESOURCE_NAME,
		})},
		RedactedFields: &redacted,
		// LoggingFilter and SingleHeader are JSON in the CloudFormation
		// schema: CDK passes them through unmapped, so keys are PascalCase.
		LoggingFilter: map[string]any{
			"DefaultBehavior": "DROP",
			"Filters": []any{map[string]any{
				"Behavior":    "KEEP",
				"Requirement": "MEETS_ANY",
				"Conditions":  []any{map[string]any{"ActionCondition": map[string]any{"Action": "BLOCK"}}},
			}},
		},
	})
	logging.Node().AddDependency(logs)
	return webACL{acl: acl, association: assoc, logs: logs, logging: logging}
}
