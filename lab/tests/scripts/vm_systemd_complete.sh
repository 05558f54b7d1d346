## The user's bash with its completions loaded (`bash -ic`, as in a terminal): what TAB offers
## after `damon-trace ` and after `damon-trace live --attach `.
## No placeholders: lab/tests/vm_systemd.rs includes it as is (COMPLETE).

_comp_load damon-trace 2> /dev/null || __load_completion damon-trace
complete -p damon-trace
fn=$(complete -p damon-trace | sed -E 's/.* -F ([^ ]+) .*/\1/')
comp() {
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
    COMPREPLY=()
    "$fn" damon-trace "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
    printf '%s\n' "${COMPREPLY[@]}"
}
echo '--- subcommands'; comp damon-trace ''
echo '--- attach'; comp damon-trace live --attach ''
echo '--- end'
