package localtier

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tiered/tiered/internal/x/kafkaerr"
	"github.com/tiered/tiered/localtier/checkpoint"
	"github.com/tiered/tiered/localtier/topicconfig"
	"github.com/tiered/tiered/localtier/vfs"
)

// Checkpoint file names in a log dir, as Kafka names them.
const (
	RecoveryPointCheckpoint  = "recovery-point-offset-checkpoint"
	LogStartOffsetCheckpoint = "log-start-offset-checkpoint"
	ReplicationCheckpoint    = "replication-offset-checkpoint"
	CleanerCheckpoint        = "cleaner-offset-checkpoint"
	LeaderEpochCheckpoint    = "leader-epoch-checkpoint"
	lockFile                 = ".lock"
	// metaDir holds tiered's own topic metadata; it is not a partition
	// directory, so Kafka tools and tiered's loader skip it.
	metaDir = ".tiered"
)

// MaxPartitions bounds --partitions on topic create.
const MaxPartitions = 10000

// UnknownTopicOrPartitionError is Kafka's UNKNOWN_TOPIC_OR_PARTITION.
type UnknownTopicOrPartitionError struct {
	Topic     string
	Partition int32 // -1 when the topic itself is unknown
}

func (e *UnknownTopicOrPartitionError) Error() string {
	if e.Partition < 0 {
		return fmt.Sprintf("unknown topic %q", e.Topic)
	}
	return fmt.Sprintf("unknown topic or partition %s-%d", e.Topic, e.Partition)
}

// Is makes errors.Is(err, kafkaerr.ErrUnknownTopicOrPartition) true.
func (e *UnknownTopicOrPartitionError) Is(target error) bool {
	return target == kafkaerr.ErrUnknownTopicOrPartition
}

// TopicExistsError is Kafka's TOPIC_ALREADY_EXISTS.
type TopicExistsError struct{ Topic string }

func (e *TopicExistsError) Error() string { return fmt.Sprintf("topic %q already exists", e.Topic) }

// Is makes errors.Is(err, kafkaerr.ErrTopicAlreadyExists) true.
func (e *TopicExistsError) Is(target error) bool { return target == kafkaerr.ErrTopicAlreadyExists }

// MissingTopicConfigError refuses a topic whose partition directories exist
// but whose config file (.tiered/topics/<topic>.json) does not.
type MissingTopicConfigError struct {
	Topic string
	Path  string
}

func (e *MissingTopicConfigError) Error() string {
	return fmt.Sprintf("topic %s has partition directories but its config file %s is missing; "+
		"tiered will not fall back to the defaults (remote.storage.enable and every other override would change): "+
		"restore the file, or write %s there if the topic had no overrides",
		e.Topic, e.Path, strings.TrimSpace(string(topicconfig.EncodeOverrides(nil))))
}

// LogDirOptions configure OpenLogDir.
type LogDirOptions struct {
	Now    func() time.Time
	Logger *slog.Logger
	// TopicDefaults are broker-wide topic config defaults (Kafka's log.*
	// broker configs mapped to topic config names), layered between Kafka's
	// defaults and each topic's overrides. Nil means Kafka's defaults.
	TopicDefaults map[string]string
	// ReadOnly opens the dir for commands that only read (consume, topic
	// describe): the dir must exist, recovery runs the same rules but in
	// memory (a vfs.Overlay), so no file is truncated, deleted, renamed or
	// written (the lock file aside), and Close writes no checkpoint. Topic
	// create and alter are refused.
	ReadOnly bool
	// MaxOpenFiles bounds the file descriptors the dir's partitions hold
	// (see FileTable): 0 means DefaultMaxOpenFiles, -1 no bound.
	MaxOpenFiles int
	// WithoutTopicIDs creates topics without a topic ID (no
	// partition.metadata), as releases before topic IDs did: their remote
	// data is the bucket's name-only lineage. For tests of that format and
	// of upgrades from it; a topic that has an ID keeps it.
	WithoutTopicIDs bool
}

// Topic is one topic of a log dir.
type Topic struct {
	Name string
	// ID is the topic ID, from its partition directories'
	// partition.metadata (Kafka's file): given at random when the topic is
	// created, so a topic created again by the same name (a data dir lost
	// and started anew over the same bucket) is another lineage in the
	// remote tier. Zero for a topic created before tiered wrote topic IDs:
	// it stays without one (the bucket's name-only lineage).
	ID         TopicID
	Overrides  map[string]string
	Partitions []*Log
}

// LogDir is a data directory of partitions, held by one process at a time
// through an flock on <dir>/.lock.
type LogDir struct {
	fs     vfs.FS
	dir    string
	now    func() time.Time
	logger *slog.Logger
	lock   io.Closer
	files  *FileTable // nil without a bound
	logFS  vfs.FS     // what partitions are opened through: fs, or fs through files

	mu       sync.RWMutex
	ckMu     sync.Mutex // serializes checkpoint writes: each file has one fixed temporary name
	topics   map[string]*Topic
	defaults map[string]string // broker-wide topic defaults under the overrides
	readOnly bool              // opened with LogDirOptions.ReadOnly: fs is an overlay
	noIDs    bool              // LogDirOptions.WithoutTopicIDs
	closed   bool
}

// errReadOnly refuses a change to a data dir opened read-only.
func (d *LogDir) errReadOnly(op string) error {
	return fmt.Errorf("%s: data dir %s is open read-only", op, d.dir)
}

// LoadReport says what OpenLogDir found and repaired.
type LoadReport struct {
	Partitions int
	Skipped    []string // directory entries that are not partitions
	// CreatesRolledBack are topics whose create a crash interrupted; their
	// leftovers were removed before loading.
	CreatesRolledBack []string
	Recovery          RecoveryReport
}

// OpenLogDir locks and loads the data directory dir, creating it if needed.
func OpenLogDir(fsys vfs.FS, dir string, opts LogDirOptions) (*LogDir, LoadReport, error) {
	var rep LoadReport
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ReadOnly {
		st, err := fsys.Stat(dir)
		if err != nil {
			return nil, rep, fmt.Errorf("open data dir: %w", err)
		}
		if !st.IsDir() {
			return nil, rep, fmt.Errorf("open data dir: %s is not a directory", dir)
		}
		fsys = vfs.NewOverlay(fsys)
	} else if err := vfs.MkdirAllSync(fsys, dir, 0o755); err != nil {
		return nil, rep, fmt.Errorf("open data dir: %w", err)
	}
	lk, err := fsys.Lock(filepath.Join(dir, lockFile))
	if err != nil {
		if errors.Is(err, vfs.ErrLocked) {
			return nil, rep, fmt.Errorf("data dir %s is in use by another tiered process: %w", dir, err)
		}
		return nil, rep, fmt.Errorf("lock data dir: %w", err)
	}
	d := &LogDir{fs: fsys, dir: dir, now: opts.Now, logger: opts.Logger, lock: lk, topics: map[string]*Topic{}, defaults: maps.Clone(opts.TopicDefaults),
		readOnly: opts.ReadOnly, noIDs: opts.WithoutTopicIDs}
	d.logFS = fsys
	if opts.MaxOpenFiles >= 0 {
		d.files = NewFileTable(opts.MaxOpenFiles)
		d.logFS = d.files.FS(fsys)
	}
	if err := d.load(&rep); err != nil {
		_ = d.closeLogs()
		_ = lk.Close()
		return nil, rep, err
	}
	return d, rep, nil
}

func (d *LogDir) load(rep *LoadReport) error {
	if err := d.rollBackCreates(rep); err != nil {
		return err
	}
	recovery, err := checkpoint.ReadOffsets(d.fs, filepath.Join(d.dir, RecoveryPointCheckpoint))
	if err != nil {
		return fmt.Errorf("load data dir: %w", err)
	}
	starts, err := checkpoint.ReadOffsets(d.fs, filepath.Join(d.dir, LogStartOffsetCheckpoint))
	if err != nil {
		return fmt.Errorf("load data dir: %w", err)
	}
	entries, err := d.fs.ReadDir(d.dir)
	if err != nil {
		return fmt.Errorf("load data dir: %w", err)
	}
	parts := map[string][]int32{}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		info, err := topicconfig.ParseDir(e.Name())
		if err != nil || info.Kind != topicconfig.DirLog {
			rep.Skipped = append(rep.Skipped, e.Name())
			continue
		}
		parts[info.Topic] = append(parts[info.Topic], info.Partition)
	}
	for name, ps := range parts {
		overrides, err := d.readOverrides(name)
		if err != nil {
			return err
		}
		cfg, err := d.parseLocked(overrides)
		if err != nil {
			return fmt.Errorf("load topic %s config: %w", name, err)
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		t := &Topic{Name: name, Overrides: overrides}
		idUnknown := false
		for i, p := range ps {
			if int32(i) != p {
				return fmt.Errorf("load topic %s: partition %d is missing (found %v)", name, i, ps)
			}
			id, err := ReadPartitionMetadata(d.fs, filepath.Join(d.dir, topicconfig.DirName(name, p)))
			if err == nil && i > 0 && id != t.ID {
				// Kafka refuses such a log too (InconsistentTopicIdException):
				// the directories are of two incarnations of the topic, and
				// uploading either into the other's lineage would mix them.
				err = fmt.Errorf("partition %d has topic id %q in its %s, partition 0 has %q: the partition directories are not of one topic",
					p, id.StringOrEmpty(), PartitionMetadataFile, t.ID.StringOrEmpty())
			}
			if err != nil && d.readOnly {
				// A reader needs no lineage: it reads the records, and says
				// the topic's ID is unknown.
				d.logger.Warn("topic id unknown", "topic", name, "partition", p, "err", err)
				t.ID, idUnknown = TopicID{}, true
				err = nil
			}
			if err != nil {
				return fmt.Errorf("load topic %s: %w (the topic id names the topic's lineage in the bucket: restore the file from another partition of the topic)", name, err)
			}
			if i == 0 && !idUnknown {
				t.ID = id
			}
			tp := checkpoint.TopicPartition{Topic: name, Partition: p}
			rp, ok := recovery[tp]
			if !ok {
				rp = -1 // unknown: recover everything
			}
			l, lr, err := OpenLog(d.logFS, filepath.Join(d.dir, topicconfig.DirName(name, p)), LogOptions{
				Config: cfg, RecoveryPoint: rp, LogStartOffset: starts[tp], LogStartOffsetFile: filepath.Join(d.dir, LogStartOffsetCheckpoint),
				ReadOnly: d.readOnly, Now: d.now, Logger: d.logger,
			})
			if err != nil {
				return err
			}
			t.Partitions = append(t.Partitions, l)
			rep.Partitions++
			rep.Recovery.add(lr)
		}
		d.topics[name] = t
	}
	return nil
}

func (d *LogDir) overridesPath(topic string) string {
	return filepath.Join(d.dir, metaDir, "topics", topic+".json")
}

func (d *LogDir) readOverrides(topic string) (map[string]string, error) {
	f, err := d.fs.Open(d.overridesPath(topic))
	if errors.Is(err, os.ErrNotExist) {
		// Falling back to the defaults would silently change the topic
		// (remote.storage.enable=false stops uploads, retention changes).
		return nil, &MissingTopicConfigError{Topic: topic, Path: d.overridesPath(topic)}
	}
	if err != nil {
		return nil, fmt.Errorf("read topic %s config: %w", topic, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, topicconfig.MaxOverridesFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read topic %s config: %w", topic, err)
	}
	m, err := topicconfig.DecodeOverrides(data)
	if err != nil {
		return nil, fmt.Errorf("read topic %s config %s: %w", topic, d.overridesPath(topic), err)
	}
	return m, nil
}

func (d *LogDir) writeOverrides(topic string, m map[string]string) error {
	dir := filepath.Dir(d.overridesPath(topic))
	if err := vfs.MkdirAllSync(d.fs, dir, 0o755); err != nil {
		return err
	}
	return vfs.WriteFileAtomic(d.fs, d.overridesPath(topic), topicconfig.EncodeOverrides(m))
}

// Dir is the data directory path.
func (d *LogDir) Dir() string { return d.dir }

// OpenFiles reports the open-file table of the dir's partitions, and false
// when the dir holds its files without a bound.
func (d *LogDir) OpenFiles() (FileTableStats, int, bool) {
	if d.files == nil {
		return FileTableStats{}, 0, false
	}
	return d.files.Stats(), d.files.Max(), true
}

// parseLocked is the effective config of a topic with overrides: Kafka's
// defaults, then the broker-wide defaults, then the overrides.
func (d *LogDir) parseLocked(overrides map[string]string) (topicconfig.Config, error) {
	if len(d.defaults) == 0 {
		return topicconfig.Parse(overrides)
	}
	return topicconfig.Parse(topicconfig.Merge(d.defaults, overrides, nil))
}

// TopicDefaults returns a copy of the broker-wide topic defaults.
func (d *LogDir) TopicDefaults() map[string]string {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return maps.Clone(d.defaults)
}

// ReloadTopicConfigs re-reads every topic's override file from disk and
// applies it, over defaults (the new broker-wide topic defaults; nil keeps
// Kafka's), to the topic's partitions. Every config is checked first: when
// any topic's config is invalid, nothing changes and the error names each
// bad topic.
func (d *LogDir) ReloadTopicConfigs(defaults map[string]string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return errors.New("reload topic configs: data dir is closed")
	}
	old := d.defaults
	d.defaults = maps.Clone(defaults)
	type change struct {
		t         *Topic
		overrides map[string]string
		cfg       topicconfig.Config
	}
	var changes []change
	var errs []error
	for name, t := range d.topics {
		overrides, err := d.readOverrides(name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cfg, err := d.parseLocked(overrides)
		if err != nil {
			errs = append(errs, fmt.Errorf("topic %s config: %w", name, err))
			continue
		}
		changes = append(changes, change{t, overrides, cfg})
	}
	if len(errs) > 0 {
		d.defaults = old
		return fmt.Errorf("reload topic configs: %w", errors.Join(errs...))
	}
	for _, c := range changes {
		c.t.Overrides = c.overrides
		for _, l := range c.t.Partitions {
			l.SetConfig(c.cfg)
		}
	}
	return nil
}

// CreateTopic validates the name and config and creates every partition
// directory with an empty active segment.
func (d *LogDir) CreateTopic(name string, partitions int, overrides map[string]string) (*Topic, error) {
	if err := topicconfig.ValidateTopicName(name); err != nil {
		return nil, err
	}
	if partitions < 1 || partitions > MaxPartitions {
		return nil, fmt.Errorf("invalid partition count %d: must be between 1 and %d", partitions, MaxPartitions)
	}
	if overrides == nil {
		overrides = map[string]string{}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.readOnly {
		return nil, d.errReadOnly("create topic")
	}
	cfg, err := d.parseLocked(overrides)
	if err != nil {
		return nil, err
	}
	if d.closed {
		return nil, errors.New("create topic: data dir is closed")
	}
	if _, ok := d.topics[name]; ok {
		return nil, &TopicExistsError{Topic: name}
	}
	for other := range d.topics {
		if topicconfig.CollidesWith(name, other) {
			return nil, fmt.Errorf("topic %q collides with existing topic %q: '.' and '_' are treated as the same character in metric names", name, other)
		}
	}
	t, err := d.createTopicLocked(name, partitions, overrides, cfg)
	if err != nil {
		return nil, fmt.Errorf("create topic %s: %w", name, err)
	}
	d.topics[name] = t
	d.logger.Info("created topic", "topic", name, "partitions", partitions, "topic_id", t.ID.StringOrEmpty())
	return t, nil
}

// createTopicLocked makes the topic's files all or nothing. The commit point
// is the removal of an intent file, .tiered/creating/<topic>.json, written (and
// synced) before anything else: while it exists the topic's partition dirs
// and config file are a create in progress. Any failure removes what was
// made, the intent last; a crash leaves the intent, and the next
// OpenLogDir removes the topic's leftovers before it loads anything
// (rollBackCreates), as Kafka's loader deletes "-delete" dirs.
func (d *LogDir) createTopicLocked(name string, partitions int, overrides map[string]string, cfg topicconfig.Config) (_ *Topic, err error) {
	intent := d.createIntentPath(name)
	if err := vfs.MkdirAllSync(d.fs, filepath.Dir(intent), 0o755); err != nil {
		return nil, err
	}
	t := &Topic{Name: name, Overrides: overrides}
	if !d.noIDs {
		t.ID = NewTopicID()
	}
	defer func() {
		if err == nil {
			return
		}
		for _, l := range t.Partitions {
			_ = l.Close()
		}
		if rerr := d.removeTopicFiles(name); rerr != nil {
			err = errors.Join(err, fmt.Errorf("roll back: %w (the next start removes the rest)", rerr))
		}
	}()
	if err := vfs.WriteFileAtomic(d.fs, intent, []byte(strconv.Itoa(partitions)+"\n")); err != nil {
		return nil, err
	}
	if err := d.writeOverrides(name, overrides); err != nil {
		return nil, err
	}
	for p := 0; p < partitions; p++ {
		pdir := filepath.Join(d.dir, topicconfig.DirName(name, int32(p)))
		l, _, err := OpenLog(d.logFS, pdir, LogOptions{
			Config: cfg, RecoveryPoint: 0, Now: d.now, Logger: d.logger,
		})
		if err != nil {
			return nil, fmt.Errorf("partition %d of %d: %w", p, partitions, err)
		}
		t.Partitions = append(t.Partitions, l)
		// Durable (tmp, fsync, rename, fsync dir) before the intent goes:
		// a committed topic always has its ID.
		if t.ID.IsZero() {
			continue
		}
		if err := WritePartitionMetadata(d.fs, pdir, t.ID); err != nil {
			return nil, fmt.Errorf("partition %d of %d: %w", p, partitions, err)
		}
	}
	if err := d.fs.SyncDir(d.dir); err != nil {
		return nil, err
	}
	if err := d.fs.Remove(intent); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	if err := d.fs.SyncDir(filepath.Dir(intent)); err != nil {
		// The intent may come back after a crash, which would undo the
		// create: refuse it now rather than acknowledge it.
		return nil, fmt.Errorf("commit: %w", err)
	}
	return t, nil
}

func (d *LogDir) createIntentPath(topic string) string {
	return filepath.Join(d.dir, metaDir, "creating", topic+".json")
}

// removeTopicFiles removes every partition dir of topic (whatever their
// number), its config file and last its create intent, syncing the dirs.
func (d *LogDir) removeTopicFiles(topic string) error {
	entries, err := d.fs.ReadDir(d.dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if info, err := topicconfig.ParseDir(e.Name()); err == nil && e.IsDir() && info.Topic == topic {
			if err := d.fs.RemoveAll(filepath.Join(d.dir, e.Name())); err != nil {
				return err
			}
		}
	}
	if err := d.fs.SyncDir(d.dir); err != nil {
		return err
	}
	if err := d.fs.Remove(d.overridesPath(topic)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := d.fs.SyncDir(filepath.Dir(d.overridesPath(topic))); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := d.fs.Remove(d.createIntentPath(topic)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := d.fs.SyncDir(filepath.Dir(d.createIntentPath(topic))); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// rollBackCreates removes the leftovers of topic creates a crash
// interrupted: every topic with a create intent.
func (d *LogDir) rollBackCreates(rep *LoadReport) error {
	intents := filepath.Dir(d.createIntentPath("x"))
	entries, err := d.fs.ReadDir(intents)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("load data dir: %w", err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".json.tmp") {
			// An intent whose write never completed: nothing else was made.
			if err := d.fs.Remove(filepath.Join(intents, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("load data dir: %w", err)
			}
			continue
		}
		topic, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || topicconfig.ValidateTopicName(topic) != nil {
			continue
		}
		if err := d.removeTopicFiles(topic); err != nil {
			return fmt.Errorf("load data dir: roll back the interrupted create of topic %s: %w", topic, err)
		}
		d.logger.Warn("rolled back a topic create that did not finish", "topic", topic, "dir", d.dir)
		rep.CreatesRolledBack = append(rep.CreatesRolledBack, topic)
	}
	return nil
}

// AlterTopic sets and deletes config overrides, validating the result.
func (d *LogDir) AlterTopic(name string, set map[string]string, del []string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.readOnly {
		return d.errReadOnly("alter topic")
	}
	t, ok := d.topics[name]
	if !ok {
		return &UnknownTopicOrPartitionError{Topic: name, Partition: -1}
	}
	merged := topicconfig.Merge(t.Overrides, set, del)
	cfg, err := d.parseLocked(merged)
	if err != nil {
		return err
	}
	if err := d.writeOverrides(name, merged); err != nil {
		return fmt.Errorf("alter topic %s: %w", name, err)
	}
	t.Overrides = merged
	for _, l := range t.Partitions {
		l.SetConfig(cfg)
	}
	return nil
}

// TopicDescription is what topic describe shows.
type TopicDescription struct {
	Name       string              `json:"topic"`
	Partitions []PartitionDesc     `json:"partitions"`
	Configs    []topicconfig.Entry `json:"configs"`
}

// PartitionDesc summarises one partition.
type PartitionDesc struct {
	Partition      int32 `json:"partition"`
	LogStartOffset int64 `json:"log_start_offset"`
	LogEndOffset   int64 `json:"log_end_offset"`
	Segments       int   `json:"segments"`
	SizeBytes      int64 `json:"size_bytes"`
}

// DescribeTopic reports a topic's partitions and every config with its source.
func (d *LogDir) DescribeTopic(name string) (TopicDescription, error) {
	d.mu.RLock()
	t, ok := d.topics[name]
	var overrides map[string]string
	if ok {
		overrides = t.Overrides
	}
	merged := topicconfig.Merge(d.defaults, overrides, nil)
	d.mu.RUnlock()
	if !ok {
		return TopicDescription{}, &UnknownTopicOrPartitionError{Topic: name, Partition: -1}
	}
	entries, err := topicconfig.Describe(merged)
	if err != nil {
		return TopicDescription{}, err
	}
	for i := range entries {
		_, set := overrides[entries[i].Name]
		entries[i].IsDefault = !set // a broker-wide default is still a default
	}
	desc := TopicDescription{Name: name, Configs: entries}
	for i, l := range t.Partitions {
		desc.Partitions = append(desc.Partitions, PartitionDesc{Partition: int32(i), LogStartOffset: l.LogStartOffset(),
			LogEndOffset: l.LogEndOffset(), Segments: len(l.Segments()), SizeBytes: l.Size()})
	}
	return desc, nil
}

// Topic returns a topic by name.
func (d *LogDir) Topic(name string) (*Topic, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	t, ok := d.topics[name]
	return t, ok
}

// Topics lists topic names, sorted.
func (d *LogDir) Topics() []string {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make([]string, 0, len(d.topics))
	for n := range d.topics {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// SelectTopics returns every topic name, sorted, or only topic when it is
// non-empty (an *UnknownTopicOrPartitionError if there is no such topic):
// the --topic filter of the one-pass commands.
func (d *LogDir) SelectTopics(topic string) ([]string, error) {
	if topic == "" {
		return d.Topics(), nil
	}
	if _, ok := d.Topic(topic); !ok {
		return nil, &UnknownTopicOrPartitionError{Topic: topic, Partition: -1}
	}
	return []string{topic}, nil
}

// PartitionLog is one partition of a log dir.
type PartitionLog struct {
	Topic     string
	Partition int32
	// TopicID is the topic's ID (Topic.ID); zero for a topic without one.
	TopicID TopicID
	Log     *Log
}

// RemotePartitions returns the partitions of topics (every topic when
// topics is nil) whose config has remote.storage.enable, in topic then
// partition order: what the uploader, remote retention and serve's remote
// loops walk.
func (d *LogDir) RemotePartitions(topics []string) []PartitionLog {
	if topics == nil {
		topics = d.Topics()
	}
	var out []PartitionLog
	for _, name := range topics {
		t, ok := d.Topic(name)
		if !ok {
			continue
		}
		for p, l := range t.Partitions {
			if l.Config().RemoteStorageEnable {
				out = append(out, PartitionLog{Topic: name, Partition: int32(p), TopicID: t.ID, Log: l})
			}
		}
	}
	return out
}

// Partition returns one partition's log.
func (d *LogDir) Partition(topic string, partition int32) (*Log, error) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	t, ok := d.topics[topic]
	if !ok {
		return nil, &UnknownTopicOrPartitionError{Topic: topic, Partition: partition}
	}
	if partition < 0 || int(partition) >= len(t.Partitions) {
		return nil, &UnknownTopicOrPartitionError{Topic: topic, Partition: partition}
	}
	return t.Partitions[partition], nil
}

// TopicID returns a topic's ID (Topic.ID: zero for a topic created before
// tiered wrote topic IDs), or an *UnknownTopicOrPartitionError.
func (d *LogDir) TopicID(topic string) (TopicID, error) {
	t, ok := d.Topic(topic)
	if !ok {
		return TopicID{}, &UnknownTopicOrPartitionError{Topic: topic, Partition: -1}
	}
	return t.ID, nil
}

// Checkpoint flushes nothing; it records every partition's recovery point and
// log start offset in the dir's checkpoint files.
func (d *LogDir) Checkpoint() error {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.checkpointLocked()
}

func (d *LogDir) checkpointLocked() error {
	if d.readOnly {
		return nil // nothing of a read-only dir is written
	}
	// Callers hold d.mu for reading only (Checkpoint, Flush), so two may
	// run at once (serve's local and remote retention loops): without this
	// they truncate and rename each other's <checkpoint>.tmp. Taking the
	// offsets under it also makes the last writer write the latest ones.
	d.ckMu.Lock()
	defer d.ckMu.Unlock()
	rps := map[checkpoint.TopicPartition]int64{}
	starts := map[checkpoint.TopicPartition]int64{}
	for name, t := range d.topics {
		for i, l := range t.Partitions {
			tp := checkpoint.TopicPartition{Topic: name, Partition: int32(i)}
			rps[tp] = l.RecoveryPoint()
			starts[tp] = l.LogStartOffset()
		}
	}
	if err := checkpoint.WriteOffsets(d.fs, filepath.Join(d.dir, RecoveryPointCheckpoint), rps); err != nil {
		return fmt.Errorf("checkpoint recovery points: %w", err)
	}
	if err := checkpoint.WriteOffsets(d.fs, filepath.Join(d.dir, LogStartOffsetCheckpoint), starts); err != nil {
		return fmt.Errorf("checkpoint log start offsets: %w", err)
	}
	return nil
}

// Flush flushes every partition and checkpoints the recovery points.
func (d *LogDir) Flush() error {
	d.mu.RLock()
	defer d.mu.RUnlock()
	for _, t := range d.topics {
		for _, l := range t.Partitions {
			if err := l.Flush(); err != nil {
				return err
			}
		}
	}
	return d.checkpointLocked()
}

func (d *LogDir) closeLogs() error {
	var errs []error
	for _, t := range d.topics {
		for _, l := range t.Partitions {
			errs = append(errs, l.Close())
		}
	}
	return errors.Join(errs...)
}

// Close flushes and closes every partition, writes the checkpoints and
// releases the lock.
func (d *LogDir) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	err := d.closeLogs()
	if err == nil && !d.readOnly {
		err = d.checkpointLocked()
	}
	return errors.Join(err, d.lock.Close())
}
