package admin

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/s3gate/s3gate/gc"
	"github.com/s3gate/s3gate/lifecycle"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/protocol"
)

// bucketHelp is the help page of `admin bucket info`.
func bucketHelp(fs *flag.FlagSet) gc.Help {
	return gc.Help{Flags: fs, Settings: []string{"database-url", "data-dir"}, Shared: true,
		Usage:   "admin bucket info NAME [-json] [settings]",
		Purpose: "Shows a bucket's versioning, Object Lock and lifecycle state and what it holds.",
		About: `What it holds is counted from the metadata (current objects, noncurrent versions,
delete markers, uploads in progress): each count reads the bucket's rows.`,
		Examples: []string{"S3GATE_DATABASE_URL=postgres://... s3gate admin bucket info backups", "s3gate admin bucket info backups -json"},
	}
}

// BucketInfo is what `admin bucket info` reports.
type BucketInfo struct {
	Name       string                  `json:"name"`
	Region     string                  `json:"region"`
	Created    time.Time               `json:"created"`
	Versioning string                  `json:"versioning"` // "" never enabled
	ObjectLock *store.ObjectLockConfig `json:"object_lock,omitempty"`
	Lifecycle  []LifecycleRule         `json:"lifecycle,omitempty"`
	Usage      store.BucketUsage       `json:"usage"`
}

// LifecycleRule names one lifecycle rule and its status.
type LifecycleRule struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// bucket runs `s3gate admin bucket info`.
func bucket(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || isHelp(args[0]) || slices.ContainsFunc(args, isHelpFlag) {
		bucketHelp(flag.NewFlagSet("s3gate admin bucket info", flag.ContinueOnError)).Write(stdout)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	if args[0] != "info" {
		fmt.Fprintf(stderr, "s3gate admin bucket: unknown command %q (info)\n", args[0])
		return exitUsage
	}
	own, cfgArgs, pos := splitArgs(args[1:])
	fs := flag.NewFlagSet("s3gate admin bucket info", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(own); err != nil {
		return exitUsage
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "s3gate admin bucket info: name one bucket")
		return exitUsage
	}
	cfg, code, done := loadConfig(cfgArgs, environ, stderr)
	if done {
		return code
	}
	e, closeFn, err := openStore(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "s3gate admin bucket info: %v\n", err)
		return exitFail
	}
	defer closeFn()
	info, err := bucketInfo(ctx, e, pos[0])
	if err != nil {
		fmt.Fprintf(stderr, "s3gate admin bucket info: %v\n", describe(err))
		return exitFail
	}
	if *asJSON {
		err = writeJSON(stdout, info)
	} else {
		err = writeBucketInfo(stdout, info)
	}
	if err != nil {
		fmt.Fprintf(stderr, "s3gate admin bucket info: %v\n", err)
		return exitFail
	}
	return exitOK
}

// bucketInfo reads the bucket, its configuration documents and its usage.
func bucketInfo(ctx context.Context, e adminEngine, name string) (BucketInfo, error) {
	b, err := e.HeadBucket(ctx, name)
	if err != nil {
		return BucketInfo{}, err
	}
	docs, err := e.BucketConfigs(ctx, name)
	if err != nil {
		return BucketInfo{}, err
	}
	info := BucketInfo{Name: b.Name, Region: b.Region, Created: b.CreatedAt.UTC(), Versioning: docs[store.BucketConfigVersioning]}
	if info.ObjectLock, err = protocol.ParseObjectLockConfig(docs[store.BucketConfigObjectLock]); err != nil {
		return BucketInfo{}, err
	}
	if doc := docs[store.BucketConfigLifecycle]; doc != "" {
		lc, err := lifecycle.Decode(doc)
		if err != nil {
			return BucketInfo{}, fmt.Errorf("stored lifecycle configuration: %w", err)
		}
		for _, r := range lc.Rules {
			info.Lifecycle = append(info.Lifecycle, LifecycleRule{ID: r.ID, Status: r.Status})
		}
	}
	usage, err := e.BucketUsage(ctx, name)
	if err != nil {
		return BucketInfo{}, err
	}
	info.Usage = usage[0]
	return info, nil
}

func writeBucketInfo(out io.Writer, b BucketInfo) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	versioning := b.Versioning
	if versioning == "" {
		versioning = "never enabled"
	}
	lock := "not enabled"
	if l := b.ObjectLock; l != nil {
		lock = "enabled, no default retention"
		if d := l.Default; d != nil {
			period := fmt.Sprintf("%d days", d.Days)
			if d.Years > 0 {
				period = fmt.Sprintf("%d years", d.Years)
			}
			lock = fmt.Sprintf("enabled, default retention %s %s", d.Mode, period)
		}
	}
	rules := "none"
	if len(b.Lifecycle) > 0 {
		names := make([]string, len(b.Lifecycle))
		for i, r := range b.Lifecycle {
			names[i] = r.ID + " (" + r.Status + ")"
		}
		rules = fmt.Sprintf("%d rules: %s", len(b.Lifecycle), strings.Join(names, ", "))
	}
	u := b.Usage
	for _, row := range [][2]string{
		{"bucket", b.Name},
		{"region", b.Region},
		{"created", b.Created.Format(time.RFC3339)},
		{"versioning", versioning},
		{"object lock", lock},
		{"lifecycle", rules},
		{"objects", fmt.Sprintf("%d (%d bytes)", u.Objects, u.ObjectBytes)},
		{"noncurrent versions", fmt.Sprintf("%d (%d bytes)", u.NoncurrentVersions, u.NoncurrentBytes)},
		{"delete markers", fmt.Sprint(u.DeleteMarkers)},
		{"uploads in progress", fmt.Sprint(u.Uploads)},
	} {
		fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
	}
	return tw.Flush()
}
