package store

// BucketConfigLifecycle is the bucket configuration document of the
// bucket's lifecycle rules (JSON of lifecycle.Configuration, which package
// lifecycle validates, matches and applies).
const BucketConfigLifecycle = "lifecycle"
