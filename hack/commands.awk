# The external programs a file starts, for hack/fresh-check.sh --deps-only. One line per use:
#
#   PROGRAM <TAB> FILE:LINE <TAB> run|lookup
#
# (`lookup`: only asked for, as in `command -v PROGRAM`.) The kind of file is its name: *.rs is
# Rust, Makefile and *.mk a Makefile (its recipes are read as shell), anything else shell.
#
# Rust: `Command::new("prog")` and `Command::new(CONST)` with `const CONST: &str = "prog"` in
# the same file. Any file: `--runtime NAME` (also "--runtime", "NAME" and --runtime=NAME), the
# OCI runtime podman is told to use. Paths count by their last part (/usr/bin/kubectl is
# kubectl).
#
# Shell: the first word of every simple command (after `VAR=value`s; behind `if`, `!`, `do`,
# `|`, `&&`, `$( )`, backquotes, subshells, braces and the like; behind the wrappers `exec`,
# `command`, `nice`, `timeout`, `xargs`, `env`, `sudo`, `nohup` and `time`, with their options),
# except shell keywords, bash builtins, the file's own functions, and words that are not a
# plain program name: anything quoted or expanded ("$engine", $(CARGO)), and relative paths
# (hack/x.sh, target/...: this repository's files and build outputs). Not seen: commands inside
# single-quoted strings (`trap '...'`, `bash -c '...'`) and programs run as arguments of other
# programs (`find -exec`), nor Makefile variables that hold commands.
#
# Portable awk (Debian's default awk is mawk).

BEGIN {
    MARK = sprintf("%c", 29)    # MARK <n> MARK in a buffer: what follows is from line n
    QUOTED = sprintf("%c", 30)  # stands for a quoted string
    EXPANDED = sprintf("%c", 31) # stands for an expansion: $( ), ${ }, $(( )), backquotes
    split("if then else elif fi do done while until for in case esac select function time ! { } [[ ]] coproc", w, " ")
    for (k in w) keyword[w[k]] = 1
    split(". : [ alias bg bind break builtin caller cd command compgen complete compopt continue declare dirs disown echo enable eval exec exit export false fc fg getopts hash help history jobs kill let local logout mapfile popd printf pushd pwd read readarray readonly return set shift shopt source suspend test times trap true type typeset ulimit umask unalias unset wait", w, " ")
    for (k in w) builtin[w[k]] = 1
    split("exec command nice timeout xargs env sudo nohup time builtin setsid", w, " ")
    for (k in w) wrapper[w[k]] = 1
    # Options of those wrappers that take an argument.
    split("-n -s -k -I -P -L -d -a -u -C -E -S --signal --kill-after --chdir --unset", w, " ")
    for (k in w) optarg[w[k]] = 1
    split("declare local export readonly typeset", w, " ")
    for (k in w) declaration[w[k]] = 1
    nlines = 0
}

FNR == 1 && NR > 1 { finish() }
{ lines[++nlines] = $0 }
END { if (nlines > 0) finish() }

function finish() {
    file = prev_file
    if (file == "") file = FILENAME
    runtimes()
    if (file ~ /\.rs$/) rust()
    else if (file ~ /(^|\/)(Makefile|[^\/]*\.mk)$/) make()
    else shell_file()
    delete lines
    nlines = 0
}

# FILENAME changes before FNR == 1 runs, so remember the file each line came from.
{ prev_file = FILENAME }

function out(prog, line, how) {
    if (prog ~ /^\//) sub(/.*\//, "", prog)
    if (prog == "") return
    printf "%s\t%s:%d\t%s\n", prog, file, line, how
}

# ---- Rust -------------------------------------------------------------------------------

function rust(    i, text, rest, pos, m, name, lit, line, k) {
    delete consts
    text = ""
    for (i = 1; i <= nlines; i++) {
        text = text lines[i] "\n"
        if (match(lines[i], /const [A-Z_][A-Z0-9_]*: &str = "[^"]*"/)) {
            m = substr(lines[i], RSTART, RLENGTH)
            name = m; sub(/^const /, "", name); sub(/:.*/, "", name)
            lit = m; sub(/^[^"]*"/, "", lit); sub(/"$/, "", lit)
            consts[name] = lit
        }
    }
    rest = text; pos = 0
    while (match(rest, /Command::new\([ \t\n]*("[^"]*"|[A-Z_][A-Z0-9_]*)[ \t\n]*\)/)) {
        m = substr(rest, RSTART, RLENGTH)
        line = 1 + count_nl(substr(text, 1, pos + RSTART))
        pos += RSTART + RLENGTH - 1
        rest = substr(rest, RSTART + RLENGTH)
        sub(/^Command::new\([ \t\n]*/, "", m); sub(/[ \t\n]*\)$/, "", m)
        if (m ~ /^"/) { gsub(/"/, "", m); lit = m }
        else if (m in consts) lit = consts[m]
        else continue
        if (lit ~ /^\// || lit !~ /\//) out(lit, line, "run")
    }
}

# `--runtime PROG` (also "--runtime", "PROG" in Rust, --runtime=PROG): the OCI runtime podman
# is told to run, in any kind of file.
function runtimes(    i, text, rest, pos, m, line) {
    text = ""
    for (i = 1; i <= nlines; i++) text = text lines[i] "\n"
    rest = text; pos = 0
    while (match(rest, /"--runtime"[ \t\n]*,[ \t\n]*"[^"]+"|--runtime[ =]['"]?[A-Za-z0-9_.\/-]+/)) {
        m = substr(rest, RSTART, RLENGTH)
        line = 1 + count_nl(substr(text, 1, pos + RSTART))
        pos += RSTART + RLENGTH - 1
        rest = substr(rest, RSTART + RLENGTH)
        sub(/"$/, "", m); sub(/.*["'= ]/, "", m)
        out(m, line, "run")
    }
}

function count_nl(s,    n) { n = gsub(/\n/, "", s); return n }

# ---- Makefile: the recipes, as shell ---------------------------------------------------

function make(    i, l, cont, text, dollar) {
    dollar = sprintf("%c", 1)
    text = ""
    cont = 0
    for (i = 1; i <= nlines; i++) {
        l = lines[i]
        if (cont || l ~ /^\t/) {
            sub(/^\t/, "", l)
            if (!cont) sub(/^[@+-]+/, "", l)
            cont = (l ~ /\\$/)
            gsub(/\$\$/, dollar, l)
            while (gsub(/\$\([^()$]*\)|\$\{[^{}$]*\}/, EXPANDED, l) > 0) {}
            gsub(/\$[@<^*?%+|]/, EXPANDED, l)
            gsub(dollar, "$", l)
        } else {
            l = ""
        }
        text = text l "\n"
    }
    shell(text)
}

# ---- Shell ------------------------------------------------------------------------------

function shell_file(    i, text) {
    text = ""
    for (i = 1; i <= nlines; i++) text = text lines[i] "\n"
    shell(text)
}

# Phase 1: the text with quotes, expansions, comments and here-documents taken out, split into
# command lists: the file's, and one per command substitution. Phase 2 reads each list.
function shell(text,    i, n, c, c1, c2, line, sp, j, k, depth, heredoc, strip, l, e, prevc) {
    delete funcs
    for (i = 1; i <= nlines; i++) {
        l = lines[i]
        if (match(l, /^[ \t]*(function[ \t]+)?[A-Za-z_][A-Za-z0-9_:.-]*[ \t]*\(\)/)) {
            l = substr(l, RSTART, RLENGTH)
            sub(/^[ \t]*(function[ \t]+)?/, "", l); sub(/[ \t]*\(\)$/, "", l)
            funcs[l] = 1
        }
    }
    delete buf; delete btype; delete bdepth; delete dq
    nlists = 0
    sp = 0; buf[0] = MARK "1" MARK; btype[0] = "top"; dq[0] = 0
    line = 1; heredoc = ""
    n = length(text)
    for (i = 1; i <= n; i++) {
        c = substr(text, i, 1)
        c1 = substr(text, i + 1, 1)
        c2 = substr(text, i + 2, 1)
        if (c == "\n") {
            line++
            if (dq[sp]) continue
            buf[sp] = buf[sp] "\n" MARK line MARK
            if (heredoc != "") {
                # Skip the here-document's lines up to its delimiter line.
                while (i < n) {
                    e = index(substr(text, i + 1), "\n")
                    if (e == 0) { i = n; break }
                    l = substr(text, i + 1, e - 1)
                    i += e
                    line++
                    if (strip) sub(/^\t+/, "", l)
                    if (l == heredoc) break
                }
                buf[sp] = buf[sp] MARK line MARK
                heredoc = ""
            }
            continue
        }
        if (dq[sp]) {
            if (c == "\\") { if (c1 == "\n") line++; i++; continue }
            if (c == "\"") { dq[sp] = 0; continue }
            if (c == "$" && c1 == "(" && c2 == "(") { i = skip_paren(text, i + 1); continue }
            if (c == "$" && c1 == "(") { sp = push(sp, "cs", line); i++; continue }
            if (c == "$" && c1 == "{") { i = skip_brace(text, i + 1); continue }
            if (c == "`") { sp = push(sp, "bt", line); continue }
            continue
        }
        if (c == "\\") {
            if (c1 == "\n") { line++; buf[sp] = buf[sp] " " MARK line MARK } else buf[sp] = buf[sp] QUOTED
            i++
            continue
        }
        prevc = substr(buf[sp], length(buf[sp]), 1)
        if (c == "#" && (prevc == "" || prevc == MARK || prevc ~ /[ \t\n;&|()]/)) {
            e = index(substr(text, i), "\n")
            if (e == 0) break
            i += e - 2
            continue
        }
        if (c == "'") {
            e = index(substr(text, i + 1), "'")
            if (e == 0) break
            line += count_nl(substr(text, i + 1, e - 1))
            i += e
            buf[sp] = buf[sp] QUOTED
            continue
        }
        if (c == "\"") { dq[sp] = 1; buf[sp] = buf[sp] QUOTED; continue }
        if (c == "$") {
            if (c1 == "(" && c2 == "(") { i = skip_paren(text, i + 1); buf[sp] = buf[sp] EXPANDED; continue }
            if (c1 == "(") { sp = push(sp, "cs", line); i++; continue }
            if (c1 == "{") { i = skip_brace(text, i + 1); buf[sp] = buf[sp] EXPANDED; continue }
            if (c1 == "'") {
                e = index(substr(text, i + 2), "'")
                if (e == 0) break
                i += e + 1
                buf[sp] = buf[sp] QUOTED
                continue
            }
            buf[sp] = buf[sp] "$"
            continue
        }
        if (c == "`") {
            if (btype[sp] == "bt") sp = pop(sp)
            else sp = push(sp, "bt", line)
            continue
        }
        if (c == "(" && btype[sp] == "cs") bdepth[sp]++
        if (c == ")" && btype[sp] == "cs") {
            if (bdepth[sp] == 0) { sp = pop(sp); continue }
            bdepth[sp]--
        }
        if (c == "<" && c1 == "<" && c2 != "<" && prevc != "<") {
            # A here-document: its delimiter, then its body is skipped at the next newline.
            j = i + 2
            strip = 0
            if (substr(text, j, 1) == "-") { strip = 1; j++ }
            while (substr(text, j, 1) ~ /[ \t]/) j++
            l = substr(text, j)
            if (match(l, /^['"]?[A-Za-z_][A-Za-z0-9_]*['"]?/)) {
                heredoc = substr(l, RSTART, RLENGTH)
                gsub(/['"]/, "", heredoc)
                i = j + RLENGTH - 1
                buf[sp] = buf[sp] "< " QUOTED
                continue
            }
        }
        buf[sp] = buf[sp] c
    }
    while (sp > 0) sp = pop(sp)
    lists[++nlists] = buf[0]
    for (k = 1; k <= nlists; k++) commands(lists[k])
}

function push(sp, type, line) {
    sp++
    buf[sp] = MARK line MARK; btype[sp] = type; bdepth[sp] = 0; dq[sp] = 0
    return sp
}

function pop(sp) {
    lists[++nlists] = buf[sp]
    sp--
    if (!dq[sp]) buf[sp] = buf[sp] EXPANDED
    return sp
}

# The index of the `)` that closes the `(` at i (nested parentheses counted).
function skip_paren(text, i,    depth, c, n) {
    depth = 0; n = length(text)
    for (; i <= n; i++) {
        c = substr(text, i, 1)
        if (c == "(") depth++
        else if (c == ")" && --depth == 0) return i
    }
    return n
}

# The index of the `}` that closes the `{` at i.
function skip_brace(text, i,    depth, c, n) {
    depth = 0; n = length(text)
    for (; i <= n; i++) {
        c = substr(text, i, 1)
        if (c == "{") depth++
        else if (c == "}" && --depth == 0) return i
    }
    return n
}

# Phase 2: the commands of one list. States: "cmd" (the next word is a command), "args" (the
# rest of a command), "wrap" (after a wrapper: its options, then the command), "lookup" (after
# `command -v`), "skip" (to the end of the command: for, select, declarations), "case" (to
# `in`), "pattern" (a case pattern, to its `)`), "test" (inside [[ ]]), "arith" (inside (( ))).
function commands(list,    n, j, c, tok, line, adj, prev, ws, ops) {
    n = length(list); j = 1; state = "cmd"; line = 1; optskip = 0; lookup_next = 0; prev = ""
    while (j <= n) {
        c = substr(list, j, 1)
        if (c == " " || c == "\t") { j++; ws = 1; continue }
        adj = !ws; ws = 0
        if (c == "\n") {
            j++
            if (state != "test" && state != "arith" && state != "case" && state != "pattern") state = "cmd"
            ws = 1
            prev = "\n"
            continue
        }
        if (c == MARK) {
            tok = substr(list, j + 1)
            tok = substr(tok, 1, index(tok, MARK) - 1)
            line = tok + 0
            j += length(tok) + 2
            ws = 1
            continue
        }
        # Operators.
        ops = substr(list, j, 2)
        if (c ~ /[;&|()<>]/) {
            if (c == "<" || c == ">" || ops == "&>") {
                # A redirection: the operator, then its target (a word) unless it is &N or &-.
                j += (ops == "&>" || ops == ">>" || ops == "<>" || ops == ">|") ? 2 : 1
                if (substr(list, j, 1) == "&") { j++; while (substr(list, j, 1) ~ /[0-9-]/) j++; continue }
                while (substr(list, j, 1) ~ /[ \t]/) j++
                while (j <= n && substr(list, j, 1) !~ /[ \t\n;&|()<>]/) j++
                continue
            }
            if (state == "test") { j += (ops == "&&" || ops == "||") ? 2 : 1; continue }
            if (state == "arith") {
                if (ops == "))") { state = "args"; j += 2 } else j++
                continue
            }
            if (state == "pattern") {
                j++
                if (c == ")") state = "cmd"
                continue
            }
            if (ops == ";;" || ops == ";&") {
                j += 2
                if (substr(list, j, 1) == "&") j++
                state = "pattern"
                continue
            }
            if (c == "(" && state == "cmd" && substr(list, j + 1, 1) == "(") { state = "arith"; j += 2; continue }
            if (c == "(" && adj && prev ~ /=$/) {
                # An array: name=( ... ).
                while (j <= n && substr(list, j, 1) != ")") {
                    if (substr(list, j, 1) == MARK) {
                        tok = substr(list, j + 1); tok = substr(tok, 1, index(tok, MARK) - 1)
                        line = tok + 0; j += length(tok) + 1
                    }
                    j++
                }
                j++
                continue
            }
            if (c == "(" && state == "args" && adj && prev != "") {
                # name() { ...: a function definition.
                j++
                continue
            }
            j += (ops == "&&" || ops == "||" || ops == "|&") ? 2 : 1
            state = "cmd"
            prev = c
            continue
        }
        # A word.
        tok = ""
        while (j <= n) {
            c = substr(list, j, 1)
            if (c ~ /[ \t\n;&|()<>]/ || c == MARK) break
            tok = tok c
            j++
        }
        if (tok ~ /^[0-9]+$/ && substr(list, j, 1) ~ /[<>]/) continue  # 2>&1: a file descriptor
        prev = tok
        word(tok, line)
    }
}

# One word in the current state (globals: `state`, `optskip`, `lookup_next`).
function word(tok, line) {
    if (state == "test") { if (tok == "]]") state = "args"; return }
    if (state == "arith" || state == "skip") return
    if (state == "case") { if (tok == "in") state = "pattern"; return }
    if (state == "pattern") { if (tok == "esac") state = "args"; return }
    if (state == "args") return
    if (state == "lookup") {
        if (tok ~ /^-/) return
        if (plain(tok)) out(tok, line, "lookup")
        return
    }
    if (state == "wrap") {
        if (lookup_next && (tok == "-v" || tok == "-V")) { state = "lookup"; lookup_next = 0; return }
        lookup_next = 0
        if (optskip) { optskip = 0; return }
        if (tok ~ /^-/) { if (tok in optarg) optskip = 1; return }
        if (tok ~ /^[0-9.]+[smhd]?$/ || tok ~ /^[A-Za-z_][A-Za-z0-9_]*=/) return
        state = "cmd"
    }
    # state == "cmd"
    if (tok ~ /^[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=/) return  # VAR=value
    if (tok == "[[") { state = "test"; return }
    if (tok == "for" || tok == "select") { state = "skip"; return }
    if (tok == "case") { state = "case"; return }
    if (tok == "function") { state = "skip"; return }
    if (tok in keyword) return
    if (tok in declaration) { state = "skip"; return }
    if (tok == "command") { state = "wrap"; lookup_next = 1; return }
    if (tok in wrapper) {
        if (!(tok in builtin) && tok != "time") out(tok, line, "run")
        state = "wrap"
        optskip = 0
        return
    }
    state = "args"
    if (tok in builtin || tok in funcs) return
    if (plain(tok)) out(tok, line, "run")
}

# A plain program name or an absolute path: not quoted, not expanded, not a relative path.
function plain(tok) {
    if (index(tok, QUOTED) || index(tok, EXPANDED) || index(tok, "$") || index(tok, "`")) return 0
    if (tok ~ /^\/[A-Za-z0-9_.\/+-]+$/) return 1
    if (tok ~ /\//) return 0
    return tok ~ /^[A-Za-z0-9_][A-Za-z0-9_.+-]*$/ && tok !~ /^[0-9]+$/
}
