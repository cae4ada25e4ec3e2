package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/apigateway"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/aws-sdk-go-v2/service/wafv2"
)

// The checks of issue 17 (edge protection, async failure handling,
// concurrency, request validation, execution logs), restated from the
// issue: purge 0 retries / 60 s and reserved concurrency 1, the workers 2
// retries / 1 h, every function's failures to the one queue, an alarm on
// it, a body validator with the two models, execution logs at ERROR, and a
// web ACL on the stage.

// checkNotHeld lists the resource types of the deployed template that the
// emulator's CloudFormation did not create: what follows checks them in the
// template only.
func (c *checker) checkNotHeld() {
	held := map[string]bool{}
	for typ := range c.physical {
		held[typ] = true
	}
	counts := map[string]int{}
	for _, r := range c.template.Resources {
		if !held[r.Type] && !strings.HasPrefix(r.Type, "AWS::CDK::") {
			counts[r.Type]++
		}
	}
	var types []string
	for t, n := range counts {
		types = append(types, fmt.Sprintf("%s (%d)", t, n))
	}
	sort.Strings(types)
	c.notHeld = counts
	if len(types) == 0 {
		c.pass("stack", "every template resource was created", "live")
		return
	}
	c.lines = append(c.lines, fmt.Sprintf("note  %-9s %s does not hold: %s", "stack", c.emulator, strings.Join(types, ", ")))
}

// templateOnly checks a resource type the emulator does not hold in the
// deployed template: check returns what it found and whether it is right.
func (c *checker) templateOnly(area, what, want, typ string, check func() (string, bool)) bool {
	if c.notHeld[typ] == 0 {
		return false
	}
	got, ok := check()
	if ok {
		c.pass(area, what+" = "+shown(want), "deployed template; "+c.emulator+" does not hold "+typ)
	} else {
		c.fail(area, what, fmt.Sprintf("deployed template %s, want %s", quote(got), shown(want)))
	}
	return true
}

// resourcesOf returns the template's resources of typ by logical id.
func (t *template) resourcesOf(typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range t.Resources {
		if r.Type == typ {
			out[id] = r.Properties
		}
	}
	return out
}

// logicalOf is the logical id of the stack resource with physical id name.
func (c *checker) logicalOf(typ, name string) string {
	for _, r := range c.physical[typ] {
		if r.physical == name {
			return r.logical
		}
	}
	return ""
}

var wantAsync = map[string]string{
	"StartRunFunctionName": "retries=2 max-age=3600 on-failure=queue",
	"ResumeFunctionName":   "retries=2 max-age=3600 on-failure=queue",
	"PurgeFunctionName":    "retries=0 max-age=60 on-failure=queue",
}

var wantReserved = map[string]string{"StartRunFunctionName": "none", "ResumeFunctionName": "none", "PurgeFunctionName": "1"}

// wantQueueRetention is the failed-events queue's retention in seconds as
// the deployed template sets it (the stack shortens it to a retention
// under 14 days), else 14 days.
func (c *checker) wantQueueRetention() string {
	if c.template != nil {
		for _, p := range c.template.resourcesOf("AWS::SQS::Queue") {
			if v, ok := at(p, "MessageRetentionPeriod").(float64); ok {
				return strconv.FormatFloat(v, 'f', -1, 64)
			}
		}
	}
	return "1209600"
}

func (c *checker) checkAsync(ctx context.Context) {
	queueURL := c.output("FailedEventsQueueUrl")
	queueArn := ""
	if queueURL != "" {
		o, err := c.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &queueURL, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
		got := ""
		if err != nil {
			got = "error: " + err.Error()
		} else {
			queueArn = o.Attributes["QueueArn"]
			got = fmt.Sprintf("sse=%s retention=%s", o.Attributes["SqsManagedSseEnabled"], o.Attributes["MessageRetentionPeriod"])
		}
		c.expect("async", "failed-events queue", got, "sse=true retention="+c.wantQueueRetention(), nil)
	}
	for _, out := range []string{"StartRunFunctionName", "ResumeFunctionName", "PurgeFunctionName"} {
		name := c.outputs[out]
		if name == "" {
			continue
		}
		reserved := "none"
		if o, err := c.lam.GetFunctionConcurrency(ctx, &lambda.GetFunctionConcurrencyInput{FunctionName: &name}); err != nil {
			reserved = "error: " + err.Error()
		} else if o.ReservedConcurrentExecutions != nil {
			reserved = fmt.Sprint(*o.ReservedConcurrentExecutions)
		}
		c.expect("function", name+" reserved concurrency", reserved, wantReserved[out], nil)

		fnLogical := c.logicalOf("AWS::Lambda::Function", name)
		fromTemplate := func() (string, bool) {
			for _, p := range c.template.resourcesOf("AWS::Lambda::EventInvokeConfig") {
				if flat(at(p, "FunctionName")) == "${"+fnLogical+"}" {
					dest := "other"
					if d := at(p, "DestinationConfig", "OnFailure", "Destination"); d != nil && strings.Contains(flat(d), "FailedEvents") {
						dest = "queue"
					}
					got := fmt.Sprintf("retries=%s max-age=%s on-failure=%s", flat(at(p, "MaximumRetryAttempts")), flat(at(p, "MaximumEventAgeInSeconds")), dest)
					return got, got == wantAsync[out]
				}
			}
			return "no event-invoke config", false
		}
		if c.templateOnly("async", name+" event-invoke config", wantAsync[out], "AWS::Lambda::EventInvokeConfig", fromTemplate) {
			continue
		}
		got := ""
		if o, err := c.lam.GetFunctionEventInvokeConfig(ctx, &lambda.GetFunctionEventInvokeConfigInput{FunctionName: &name}); err != nil {
			got = "error: " + err.Error()
		} else {
			dest := "other"
			if o.DestinationConfig != nil && o.DestinationConfig.OnFailure != nil && aws.ToString(o.DestinationConfig.OnFailure.Destination) == queueArn {
				dest = "queue"
			}
			got = fmt.Sprintf("retries=%d max-age=%d on-failure=%s", aws.ToInt32(o.MaximumRetryAttempts), aws.ToInt32(o.MaximumEventAgeInSeconds), dest)
		}
		c.expect("async", name+" event-invoke config", got, wantAsync[out], nil)
	}

	const wantAlarm = "queue-depth>0 -> topic"
	alarmFromTemplate := func() (string, bool) {
		for _, p := range c.template.resourcesOf("AWS::CloudWatch::Alarm") {
			got := fmt.Sprintf("queue-depth>%s -> %s", flat(at(p, "Threshold")), map[bool]string{true: "topic", false: "none"}[strings.Contains(flat(at(p, "AlarmActions")), "Alarms")])
			if flat(at(p, "MetricName")) == "ApproximateNumberOfMessagesVisible" {
				return got, got == wantAlarm
			}
		}
		return "no alarm on the queue", false
	}
	if !c.templateOnly("async", "failed-events alarm", wantAlarm, "AWS::CloudWatch::Alarm", alarmFromTemplate) {
		got := "no alarm on the queue"
		o, err := c.cw.DescribeAlarms(ctx, &cloudwatch.DescribeAlarmsInput{})
		if err != nil {
			got = "error: " + err.Error()
		} else {
			for _, a := range o.MetricAlarms {
				if aws.ToString(a.MetricName) == "ApproximateNumberOfMessagesVisible" && len(a.Dimensions) == 1 && strings.HasSuffix(queueURL, "/"+aws.ToString(a.Dimensions[0].Value)) {
					to := "none"
					if len(a.AlarmActions) == 1 && a.AlarmActions[0] == c.outputs["AlarmTopicArn"] {
						to = "topic"
					}
					got = fmt.Sprintf("queue-depth>%g -> %s", aws.ToFloat64(a.Threshold), to)
				}
			}
		}
		c.expect("async", "failed-events alarm", got, wantAlarm, nil)
	}
}

func (c *checker) checkValidationAndEdge(ctx context.Context, apiID string) {
	const wantValidation = "validator(body,params) models=Decision,StartRequest,ToolResultsSubmission"
	validationFromTemplate := func() (string, bool) {
		var names []string
		for _, p := range c.template.resourcesOf("AWS::ApiGateway::Model") {
			names = append(names, flat(at(p, "Name")))
		}
		sort.Strings(names)
		v := "no validator"
		for _, p := range c.template.resourcesOf("AWS::ApiGateway::RequestValidator") {
			v = fmt.Sprintf("validator(body=%s,params=%s)", flat(at(p, "ValidateRequestBody")), flat(at(p, "ValidateRequestParameters")))
		}
		got := strings.Replace(v, "body=true,params=true", "body,params", 1) + " models=" + strings.Join(names, ",")
		return got, got == wantValidation
	}
	if !c.templateOnly("api", "request validation", wantValidation, "AWS::ApiGateway::RequestValidator", validationFromTemplate) {
		got := "no validator"
		if o, err := c.apg.GetRequestValidators(ctx, &apigateway.GetRequestValidatorsInput{RestApiId: &apiID}); err != nil {
			got = "error: " + err.Error()
		} else {
			for _, v := range o.Items {
				if v.ValidateRequestBody && v.ValidateRequestParameters {
					got = "validator(body,params)"
				}
			}
		}
		var names []string
		if o, err := c.apg.GetModels(ctx, &apigateway.GetModelsInput{RestApiId: &apiID}); err == nil {
			for _, m := range o.Items {
				if n := aws.ToString(m.Name); n != "Empty" && n != "Error" {
					names = append(names, n)
				}
			}
		}
		sort.Strings(names)
		c.expect("api", "request validation", got+" models="+strings.Join(names, ","), wantValidation, nil)
	}

	const wantACL = "web ACL (ApprovalRatePerIP, CommonRules) on the stage"
	aclFromTemplate := func() (string, bool) {
		var rules []string
		for _, p := range c.template.resourcesOf("AWS::WAFv2::WebACL") {
			for _, r := range at(p, "Rules").([]any) {
				rules = append(rules, flat(at(r, "Name")))
			}
		}
		on := "nothing"
		for _, p := range c.template.resourcesOf("AWS::WAFv2::WebACLAssociation") {
			if strings.Contains(flat(at(p, "ResourceArn")), "/stages/") {
				on = "the stage"
			}
		}
		got := fmt.Sprintf("web ACL (%s) on %s", strings.Join(rules, ", "), on)
		return got, got == wantACL
	}
	if !c.templateOnly("edge", "web ACL", wantACL, "AWS::WAFv2::WebACL", aclFromTemplate) {
		stageArn := fmt.Sprintf("arn:aws:apigateway:%s::/restapis/%s/stages/%s", c.region, apiID, c.expectStage)
		got := ""
		if o, err := c.waf.GetWebACLForResource(ctx, &wafv2.GetWebACLForResourceInput{ResourceArn: &stageArn}); err != nil {
			got = "error: " + err.Error()
		} else if o.WebACL != nil {
			var rules []string
			for _, r := range o.WebACL.Rules {
				rules = append(rules, aws.ToString(r.Name))
			}
			got = fmt.Sprintf("web ACL (%s) on the stage", strings.Join(rules, ", "))
		}
		c.expect("edge", "web ACL", got, wantACL, nil)
	}
}
