"""The build history's SQLite schema: its tables, their version and the columns added since.

Tables:
- `builds`: one row per build: what ran (name, backend, variant, argv, cwd, checkout, settings,
  jobs), its state (`starting` → `running` → `stopping` → a final state), the supervisor's and
  the build's PIDs, start, end, duration, exit status, signal, a note for the user ("killed
  (OOM?) while compiling ..."), and the live view (`progress`, `live`: JSON the supervisor
  rewrites about once a second for `status` and `attach`).
- `samples`: the whole build once a second (CPU, RSS, memory available, jobs, progress).
- `measurements`: what one build measured (wall time, CPU, peaks, most jobs at once, which
  processes were seen), written when it ends.
- `jobs`: every compile and link job the sampler saw (file, kind, tool, seconds, peak RSS).
- `derivations`: every Nix derivation built, with start and end.
- `edges`: every edge ninja ran, timed exactly from `.ninja_log` (epoch start and end), with the
  executed edges it waited for (from the ninja graph) and its sampled peak RSS when seen.
"""

from __future__ import annotations

DB_NAME = "history.sqlite3"
SCHEMA_VERSION = 4  # 4: build_targets (one row per target of a matrix build)
# Columns added after a table was first created: (table, column, declaration). A history of an
# older schema gets them on opening (ALTER TABLE ... ADD COLUMN), so adding one is one line here.
ADDED_COLUMNS: tuple[tuple[str, str, str], ...] = (
    # What outlived the build (daemons, orphans): [{"pid", "started", "name"}], for `stop`.
    ("builds", "outlived", "TEXT"),
    # The build's .ninja_log, when one was found (its edges are in `edges`).
    ("builds", "ninja_log", "TEXT"),
    # What was built (build tree and targets): the ETA matches earlier runs by this, not by name.
    ("builds", "work_key", "TEXT"),
    # What a successful Nix/Flox build produced: out-links, store paths, NAR and closure sizes,
    # CUDA architectures inside (workbench.artefacts.sizes).
    ("builds", "artefacts", "TEXT"),
    # Sampled CPU seconds of an edge's compiler processes (a lower bound), beside its peak RSS.
    ("edges", "cpu_s", "REAL"),
    # Supervisors that were lost and replaced while the build ran (keeper.py): [{"lost_pid",
    # "lost_at", "adopted_at", "pid", "unobserved_s"}]; [] or NULL when its first one saw it all.
    ("builds", "adopted", "TEXT"),
    # Seconds of CPU use a sample's CPU figures cover; 0 where they measured none (the
    # sampler's first reading, the exit sample): `records.Sampled.cpu_interval`.
    ("samples", "cpu_interval", "REAL"),
)

SCHEMA = """
CREATE TABLE IF NOT EXISTS builds (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    backend TEXT NOT NULL,
    variant TEXT,
    target TEXT,
    argv TEXT NOT NULL,
    cwd TEXT NOT NULL,
    checkout TEXT NOT NULL,
    settings TEXT NOT NULL,
    jobs INTEGER,
    eta_key TEXT NOT NULL,
    nix INTEGER NOT NULL,
    forced INTEGER NOT NULL DEFAULT 0,
    state TEXT NOT NULL,
    host TEXT,
    user TEXT,
    created REAL NOT NULL,
    started REAL,
    ended REAL,
    duration_s REAL,
    exit_status INTEGER,
    signal INTEGER,
    note TEXT,
    log_path TEXT NOT NULL,
    supervisor_pid INTEGER,
    supervisor_started REAL,
    build_pid INTEGER,
    pgid INTEGER,
    lines INTEGER NOT NULL DEFAULT 0,
    progress TEXT,
    live TEXT,
    updated REAL,
    stop_requested REAL,
    stop_grace REAL
);
CREATE INDEX IF NOT EXISTS builds_state ON builds(state);
CREATE INDEX IF NOT EXISTS builds_eta ON builds(eta_key, state);
CREATE INDEX IF NOT EXISTS builds_name ON builds(name, state);
CREATE TABLE IF NOT EXISTS samples (
    build_id INTEGER NOT NULL REFERENCES builds(id) ON DELETE CASCADE,
    t REAL NOT NULL,
    cpu_percent REAL NOT NULL,
    cpu_cores REAL NOT NULL,
    cpu_seconds REAL NOT NULL,
    rss INTEGER NOT NULL,
    memory_available INTEGER NOT NULL,
    processes INTEGER NOT NULL,
    compile_jobs INTEGER NOT NULL,
    cuda_jobs INTEGER NOT NULL,
    link_jobs INTEGER NOT NULL,
    fraction REAL
);
CREATE INDEX IF NOT EXISTS samples_build ON samples(build_id, t);
CREATE TABLE IF NOT EXISTS measurements (
    build_id INTEGER PRIMARY KEY REFERENCES builds(id) ON DELETE CASCADE,
    wall_s REAL NOT NULL,
    cpu_seconds REAL NOT NULL,
    cpu_utilisation REAL NOT NULL,
    cpus INTEGER NOT NULL,
    peak_rss INTEGER NOT NULL,
    min_memory_available INTEGER NOT NULL,
    memory_total INTEGER NOT NULL,
    most_jobs INTEGER NOT NULL,
    samples INTEGER NOT NULL,
    peak_job_rss TEXT NOT NULL,
    peak_process_rss TEXT NOT NULL,
    census TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS jobs (
    build_id INTEGER NOT NULL REFERENCES builds(id) ON DELETE CASCADE,
    file TEXT,
    kind TEXT NOT NULL,
    tool TEXT NOT NULL,
    seconds REAL NOT NULL,
    peak_rss INTEGER NOT NULL,
    started REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS jobs_build ON jobs(build_id, kind, peak_rss);
CREATE TABLE IF NOT EXISTS edges (
    build_id INTEGER NOT NULL REFERENCES builds(id) ON DELETE CASCADE,
    output TEXT NOT NULL,
    outputs TEXT,
    started REAL NOT NULL,
    ended REAL NOT NULL,
    session INTEGER NOT NULL,
    command_hash TEXT NOT NULL,
    rule TEXT,
    deps TEXT,
    peak_rss INTEGER
);
CREATE INDEX IF NOT EXISTS edges_build ON edges(build_id);
CREATE TABLE IF NOT EXISTS derivations (
    build_id INTEGER NOT NULL REFERENCES builds(id) ON DELETE CASCADE,
    drv_path TEXT NOT NULL,
    name TEXT NOT NULL,
    started REAL NOT NULL,
    ended REAL NOT NULL,
    failed INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS build_targets (
    build_id INTEGER NOT NULL REFERENCES builds(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    attr TEXT NOT NULL,
    drv_path TEXT,
    out_path TEXT,
    host TEXT,
    outcome TEXT NOT NULL,
    tried_on TEXT,
    started REAL,
    ended REAL,
    nar_size INTEGER,
    closure_size INTEGER,
    first_error TEXT,
    PRIMARY KEY (build_id, name)
);
"""
