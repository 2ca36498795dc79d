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

# Load benchmarks against a release build (needs wrk and GNU time); results go into docs/performance.md.
# With a PostgreSQL URL (`just bench postgres://postgres@127.0.0.1:5432/postgres`) PostgreSQL is
# benched too, in scratch databases.
bench pg="":
    bash bench/auth.sh {{pg}}
    bash bench/blog.sh {{pg}}
    bash bench/reads.sh {{pg}}
    bash bench/comms.sh
    bash bench/ai.sh
    bash bench/payment.sh {{pg}}

# The provider simulator for local demos.
sim:
    cargo run -p provider-sim-bin -- --addr 127.0.0.1:9900
