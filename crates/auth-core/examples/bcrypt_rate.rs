//! Measures bcrypt verifications per second on one core at a given cost (default 12):
//! `cargo run --release -p auth-core --example bcrypt_rate -- 12`. The ceiling of login throughput
//! per core, since every login costs exactly one verification.

use std::time::Instant;

fn main() {
    let cost: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(12);
    let Ok(hash) = bcrypt::hash("bench-password-1", cost) else {
        eprintln!("cost {cost} is not a valid bcrypt cost");
        std::process::exit(2);
    };
    let rounds = if cost >= 12 { 20 } else { 200 };
    let start = Instant::now();
    for _ in 0..rounds {
        let _ = bcrypt::verify("bench-password-1", &hash);
    }
    let seconds = start.elapsed().as_secs_f64();
    println!(
        "bcrypt cost {cost}: {:.1} verifications/s on one core ({:.1} ms each)",
        f64::from(rounds) / seconds,
        seconds * 1000.0 / f64::from(rounds)
    );
}
