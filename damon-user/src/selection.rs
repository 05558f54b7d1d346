//! Which functions a session traces: the built-in ones and `--func` ones, resolved and checked
//! into [`TracedFunction`]s with their ids.
use damon_common::FunctionId;

use crate::{
    error::UsageError,
    trace::{FunctionNames, TracedFunction},
};

mod glob;

/// Resolves `--functions` and `--func` into the functions to trace, with their ids: the
/// built-in ones named by `--functions` (all four when neither flag is given), then the
/// `--func` ones in command-line order with ids from [`damon_common::FIRST_USER_FUNC`]. Usage
/// errors: unknown or repeated built-in names, an empty or malformed `--func` name, a `--func`
/// naming a built-in function or given twice, more than [`damon_common::MAX_USER_FUNCS`].
/// Whether the kernel has the `--func` symbols is [`check_symbols`]' job.
pub fn select_functions(sel: &FunctionNames) -> anyhow::Result<Vec<TracedFunction>> {
    Ok(select_and_expand(sel)?.0)
}

/// [`select_functions`] with the `--func` globs expanded first (see [`glob::expand`]) over
/// the functions this kernel can trace; also gives one line per glob saying what it matched,
/// for the session to print.
pub fn select_and_expand(
    sel: &FunctionNames,
) -> anyhow::Result<(Vec<TracedFunction>, Vec<String>)> {
    if !sel.others.iter().any(|n| glob::is_glob(n)) {
        return Ok((select_names(sel)?, Vec::new()));
    }
    let traceable = traceable_functions()?;
    let builtins = FunctionId::ALL.map(FunctionId::symbol);
    let max = damon_common::MAX_USER_FUNCS as usize;
    let (others, lines) = glob::expand(&sel.others, &traceable, &builtins, max)?;
    let expanded = FunctionNames {
        builtins: sel.builtins.clone(),
        others,
    };
    Ok((select_names(&expanded)?, lines))
}

/// The functions a `--func` glob may expand to, sorted: those ftrace can attach to
/// (`available_filter_functions`, which fentry needs) and that the kprobe blacklist does not
/// name (when it can be read). A usage error says why the list cannot be read.
fn traceable_functions() -> anyhow::Result<Vec<String>> {
    let mut names = crate::probe::facts::kernel::ftrace_functions().map_err(|e| {
        UsageError(format!(
            "a --func glob is matched against the functions this kernel can trace, but {e}; \
             run as root with tracefs available, or name the functions without * ? ["
        ))
    })?;
    if let Some(blacklist) = crate::probe::facts::kernel::kprobe_blacklist() {
        names.retain(|n| !blacklist.contains(n));
    }
    let mut names: Vec<String> = names.into_iter().collect();
    names.sort_unstable();
    Ok(names)
}

/// [`select_functions`] once every name is plain.
fn select_names(sel: &FunctionNames) -> anyhow::Result<Vec<TracedFunction>> {
    let mut out: Vec<TracedFunction> = select_builtins(&sel.builtins, !sel.others.is_empty())?
        .into_iter()
        .map(TracedFunction::builtin)
        .collect();
    let max = damon_common::MAX_USER_FUNCS as usize;
    if sel.others.len() > max {
        return Err(UsageError(format!(
            "{} --func functions given; at most {max} can be traced at once",
            sel.others.len()
        ))
        .into());
    }
    let mut seen: Vec<&str> = Vec::new();
    for (i, name) in sel.others.iter().enumerate() {
        let name = name.trim();
        if name.is_empty() {
            return Err(UsageError("--func needs a kernel function name".to_owned()).into());
        }
        if !is_symbol_name(name) {
            return Err(UsageError(format!(
                "--func `{name}` is not a kernel function name (letters, digits, `_` and `.` only), nor a glob (`*`, `?`, `[...]`)"
            ))
            .into());
        }
        if FunctionId::from_symbol(name).is_some() {
            return Err(UsageError(format!(
                "--func `{name}` is a built-in function; select it with --functions {name}"
            ))
            .into());
        }
        if seen.contains(&name) {
            return Err(UsageError(format!("--func `{name}` is given twice")).into());
        }
        seen.push(name);
        out.push(TracedFunction {
            id: damon_common::FIRST_USER_FUNC + i as u32,
            symbol: name.to_owned(),
        });
    }
    Ok(out)
}

/// Checks that the kernel has each `--func` function (a text symbol in /proc/kallsyms): a
/// usage error naming the first one it does not have, with the closest name it does have.
/// Functions that exist but cannot be traced (notrace, kprobe-blacklisted, inlined with only
/// compiler clones left) are not errors here: the session reports each one's status and why,
/// as for the built-in functions. When kallsyms cannot be read, attaching will say why.
pub fn check_symbols(functions: &[TracedFunction]) -> anyhow::Result<()> {
    use crate::probe::facts::kernel::{Kallsyms, SymbolPresence};
    let user: Vec<&TracedFunction> = functions
        .iter()
        .filter(|f| f.as_builtin().is_none())
        .collect();
    if user.is_empty() {
        return Ok(());
    }
    let Ok(kallsyms) = Kallsyms::read() else {
        return Ok(());
    };
    for f in user {
        if kallsyms.presence(&f.symbol) == SymbolPresence::Absent {
            let hint = kallsyms
                .closest(&f.symbol)
                .map_or_else(String::new, |c| format!("; did you mean `{c}`?"));
            return Err(UsageError(format!(
                "--func `{}`: this kernel has no such function (not a text symbol in \
                 /proc/kallsyms){hint}",
                f.symbol
            ))
            .into());
        }
    }
    Ok(())
}

/// What a kernel text symbol can look like (`name`, or a compiler clone `name.isra.0`).
fn is_symbol_name(name: &str) -> bool {
    name.len() <= 255
        && !name.starts_with(['.', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9'])
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
}

/// The built-in functions named by `--functions`: all four when it is empty, unless `--func`
/// is given (then `--func` alone says what to trace).
fn select_builtins(names: &[String], user_funcs: bool) -> anyhow::Result<Vec<FunctionId>> {
    if names.is_empty() {
        return Ok(if user_funcs {
            Vec::new()
        } else {
            FunctionId::ALL.to_vec()
        });
    }
    let known = || FunctionId::ALL.map(FunctionId::symbol).join(", ");
    let mut out = Vec::new();
    for name in names {
        let name = name.trim();
        let f = FunctionId::from_symbol(name).ok_or_else(|| {
            UsageError(format!(
                "unknown function `{name}`; the built-in functions are: {}",
                known()
            ))
        })?;
        if out.contains(&f) {
            return Err(
                UsageError(format!("function `{name}` is given twice in --functions")).into(),
            );
        }
        out.push(f);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(names: &[&str]) -> FunctionNames {
        FunctionNames {
            builtins: names.iter().map(|s| s.to_string()).collect(),
            others: Vec::new(),
        }
    }

    #[test]
    fn selects_functions() {
        assert_eq!(select_functions(&sel(&[])).expect("all").len(), 4);
        assert_eq!(
            select_functions(&sel(&["lock_timer_base", "damon_hot_score"])).expect("two"),
            vec![
                TracedFunction::builtin(FunctionId::LockTimerBase),
                TracedFunction::builtin(FunctionId::DamonHotScore)
            ]
        );
        let e = select_functions(&sel(&["nope"]))
            .expect_err("unknown")
            .to_string();
        assert!(
            e.contains("nope") && e.contains("damon_migrate_pages"),
            "{e}"
        );
        assert!(select_functions(&sel(&["lock_timer_base", "lock_timer_base"])).is_err());
    }
}
