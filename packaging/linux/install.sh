#!/bin/sh
# Put Ember in this user's application menu (and `ember` on PATH), from wherever this folder is.
#   ./install.sh              add the menu entry, the icons and ~/.local/bin/ember
#   ./install.sh --uninstall  remove them again (the folder itself stays where it is)
set -eu

here=$(cd "$(dirname "$0")" && pwd)
data=${XDG_DATA_HOME:-"$HOME/.local/share"}
bin="$HOME/.local/bin"
desktop="$data/applications/ember.desktop"

refresh() {
    command -v update-desktop-database >/dev/null 2>&1 && update-desktop-database -q "$data/applications" || true
    command -v gtk-update-icon-cache >/dev/null 2>&1 && gtk-update-icon-cache -q -t "$data/icons/hicolor" || true
}

if [ "${1:-}" = "--uninstall" ]; then
    rm -f "$desktop"
    find "$data/icons/hicolor" -name 'ember.png' -path '*/apps/*' -delete 2>/dev/null || true
    rm -f "$data/icons/hicolor/scalable/apps/ember.svg"
    if [ -L "$bin/ember" ] && [ "$(readlink "$bin/ember")" = "$here/ember" ]; then
        rm -f "$bin/ember"
    fi
    refresh
    echo "Ember removed from the menu."
    exit 0
fi

mkdir -p "$data/applications" "$bin"
cp -R "$here/share/icons/." "$data/icons/"
# Exec needs the absolute path; quoted for the desktop-entry spec (\, ", ` and $ escaped).
exe=$(printf '%s' "$here/ember" | sed -e 's/[\\"`$]/\\\\&/g')
{
    grep -v -e '^Exec=' -e '^TryExec=' "$here/share/applications/ember.desktop"
    printf 'Exec="%s" %%f\n' "$exe"
    printf 'TryExec=%s\n' "$here/ember"
} > "$desktop"
ln -sf "$here/ember" "$bin/ember"
refresh
echo "Ember added to the application menu; \`ember\` is in $bin."
