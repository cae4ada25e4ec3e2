package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go/logging"
)

// loadAWSConfig is awsconfig.LoadDefaultConfig for serve (the store, the
// model's Bedrock and Secrets Manager, the tool sources' secrets) with the
// SDK's log lines in serve's JSON log (sdkLogger) instead of the SDK's
// default, plain-text lines on stderr.
func loadAWSConfig(ctx context.Context, logger *slog.Logger) (aws.Config, error) {
	return awsconfig.LoadDefaultConfig(ctx, awsconfig.WithLogger(sdkLogger{logger}))
}

// sdkLogger writes the AWS SDK's log lines to a slog logger at their level:
// WARN as a warning, DEBUG (such as S3's "Response has no supported
// checksum", which every emulator's answer gets) as debug, which serve's
// info-level log drops.
type sdkLogger struct{ logger *slog.Logger }

// Logf logs one SDK line, tagged component "aws-sdk".
func (l sdkLogger) Logf(c logging.Classification, format string, v ...any) {
	level := slog.LevelInfo
	switch c {
	case logging.Warn:
		level = slog.LevelWarn
	case logging.Debug:
		level = slog.LevelDebug
	}
	l.logger.Log(context.Background(), level, fmt.Sprintf(format, v...), "component", "aws-sdk")
}
