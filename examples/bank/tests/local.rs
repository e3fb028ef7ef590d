//! `bank-local`: the bank's whole system (its event store and its
//! projector, `src/system.rs`) run from `local/accounts.txt` in memory;
//! an erasure, which the bank cannot do, refused in `erase`'s words.

use std::process::Command;

fn local(script: &str) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_bank-local"))
        .arg(script)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("PERSONAL_DATA_KEY")
        .output()
        .expect("run bank-local");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn the_script_opens_accounts_moves_money_and_counts_a_fee() {
    let (code, out, err) = local("local/accounts.txt");
    assert_eq!(code, 0, "{out}\n{err}");
    for line in [
        "projector  acct-1 seq 3 MoneyWithdrawn applied",
        "projector  acct-1/fees seq - FeeCharged applied",
        // The table at the end.
        "account  acct-1       sequence 3   Ada Lovelace: 97500 EUR cents",
        "account  acct-2       sequence 2   Alan Turing: 5000 GBP cents",
        "fees     acct-1/fees  chargedCents 150",
    ] {
        assert!(out.contains(line), "{line} missing:\n{out}");
    }
}

#[test]
fn an_erasure_in_a_domain_without_personal_data_is_refused_as_erase_says() {
    let dir = std::env::temp_dir().join(format!("bank-local-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a directory");
    let script = dir.join("erase.txt");
    std::fs::write(
        &script,
        "append acct-9 AccountOpened {\"owner\": \"Ada\", \"currency\": \"EUR\"}\nerase acct-9\n",
    )
    .expect("write the script");
    let (code, out, err) = local(script.to_str().expect("a path"));
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        out.contains(
            "refused   erase acct-9: the domain declares no personal data: there is nothing to erase"
        ),
        "{out}"
    );
}
