# Convenience recipes; each is a plain cargo (or shell) command you can run without just.

# Run the server (embedded SQLite at data/keel.db unless DATABASE_URL says otherwise).
run:
    cargo run -p keel

# Run every test (PostgreSQL and Redis halves need TEST_DATABASE_URL / TEST_REDIS_URL).
test:
    cargo test --workspace --all-features

# What CI runs: PostgreSQL and Redis started, fmt, clippy, tests.
ci:
    bash .ci/run

lint:
    cargo clippy --workspace --all-targets --all-features -- -D warnings

fmt:
    cargo fmt --all

# Every load benchmark against a release build, on SQLite and PostgreSQL (needs wrk, python3 and
# GNU time); rewrites the generated tables of docs/performance.md. PostgreSQL: the given server
# (`just bench postgres://postgres@127.0.0.1:5432/postgres`), else that default one when it answers;
# `none` for SQLite only. Scratch databases are created and dropped. See bench/run.sh.
bench pg="":
    bash bench/run.sh {{pg}}

# Every module on one machine, offline: provider-sim and keel in a scratch folder, a tour of
# chat, email, SMS, checkout and a task (`just demo --keep` leaves both running). See
# docs/provider-sim.md.
demo *args:
    bash deploy/demo.sh {{args}}

# The provider simulator for local demos.
sim:
    cargo run -p provider-sim-bin -- --addr 127.0.0.1:9900
